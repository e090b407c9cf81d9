from . import clear  # noqa: F401  (registers --task clear)
