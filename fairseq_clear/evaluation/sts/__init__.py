"""clear-eval-sts: SentEval STS scoring (``scoring.py``) and SentEval's supervised relatedness
regressor (``relatedness.py``, also used by clear-eval-senteval for SICK-R and STS-B)."""
