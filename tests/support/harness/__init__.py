"""Test harnesses (not installed with the package): kill-and-resume runs, the distributed
check, nasty corpora.

Used by ``tests/test_*.py`` (``tests/`` is on ``sys.path`` through conftest.py) and the long
checks in ``scripts/reliability/``.
"""
