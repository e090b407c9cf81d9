"""Sentence-embedding evaluation, one sub-package per job (the console scripts are in ``cli/``).

* :mod:`.sts` — clear-eval-sts: SentEval STS scoring of a checkpoint or a Hugging Face /
  sentence-transformers folder (``scoring.py``) and SentEval's supervised STS-B/SICK-R regressor
  (``relatedness.py``); the STS/SICK files are read by ``preprocessing/sts_readers.py``.
* :mod:`.senteval` — clear-eval-senteval: SentEval's transfer and probing tasks (``data.py``),
  its classifier (``classifier.py``), the scoring with its vector cache (``transfer.py``).
* :mod:`.glue` — clear-glue: GLUE split, fine-tuning settings and metrics (``finetune.py``;
  the GLUE files are read by ``preprocessing/glue_data.py``).
* :mod:`.multitask` — clear-eval-multitask: seed 004's three-task evaluation (``scoring.py``).
* ``mteb_encoder.py`` (the MTEB adapter), ``training_log.py`` (fairseq-train's JSON log and its
  plot, clear-plot), ``row_names.py`` (the one rule naming the rows of a table of several models).

In-training STS-B validation (``--sts-validation``) is part of the tasks: ``tasks/sts_validation.py``.
"""
