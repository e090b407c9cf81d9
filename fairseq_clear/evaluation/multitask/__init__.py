"""clear-eval-multitask: seed 004's evaluation of its three heads and the cosine baseline
(``scoring.py``)."""
