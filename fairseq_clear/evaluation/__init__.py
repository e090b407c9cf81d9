"""Sentence-embedding evaluation: SentEval STS, GLUE metrics."""
