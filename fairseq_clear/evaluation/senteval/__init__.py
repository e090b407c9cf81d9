"""clear-eval-senteval: SentEval's transfer and probing tasks (``data.py``), its classifier
(``classifier.py``) and their scoring with a vector cache (``transfer.py``)."""
