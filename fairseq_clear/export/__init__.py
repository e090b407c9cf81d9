"""Exports of trained models to other libraries' formats (Hugging Face / sentence-transformers)."""
