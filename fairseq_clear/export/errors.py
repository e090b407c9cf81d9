"""The export's error (defined in the package's errors.py: the tokenizers' Hugging Face builders,
below the export, raise it too); hf.py and model_card.py import it from here."""

from ..errors import ExportError  # noqa: F401
