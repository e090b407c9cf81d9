"""Test harnesses shipped with the package: kill-and-resume runs, nasty corpora.

Used by ``tests/test_reliability*.py`` and the long checks in ``scripts/reliability/``.
"""
