from . import clear, multitask  # noqa: F401  (registers --criterion clear and multitask)
