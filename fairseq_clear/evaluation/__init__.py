"""Sentence-embedding evaluation: SentEval STS, GLUE metrics.

* :mod:`.embedding` — batched tokenisation and forward passes (the hub's ``embed()``).
* :mod:`.sts` — SentEval STS readers, Spearman with SentEval's "all" aggregation,
  alignment and uniformity (Wang & Isola 2020).
* :mod:`.sts_validation` — ``--sts-validation``: STS-B dev Spearman at every validation.
* :mod:`.glue` — GLUE data preparation, fine-tuning settings and metrics.
"""
