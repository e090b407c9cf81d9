from . import clear  # noqa: F401  (registers --criterion clear)
