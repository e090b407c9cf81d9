"""The export's error, in its own module so that hf.py and model_card.py both raise it without importing each other."""

from ..errors import FairseqClearError


class ExportError(FairseqClearError, ValueError):
    """The checkpoint cannot be represented exactly as an XLM-R model; the message says why."""
