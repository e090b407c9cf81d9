"""pytest plugin: ``import fairseq_clear``, as fairseq-train --user-dir does, before any test runs."""

import fairseq_clear  # noqa: F401
