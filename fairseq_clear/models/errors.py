"""Errors of the model package, importable without the model (no import cycle)."""

from ..errors import FairseqClearError


class DictionarySizeError(FairseqClearError, ValueError):
    """A checkpoint's embedding table does not match the size of the dictionary loaded."""
