"""clear-glue: GLUE split, fairseq's fine-tuning settings and GLUE's metrics (``finetune.py``)."""
