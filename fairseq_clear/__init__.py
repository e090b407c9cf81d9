"""fairseq-clear: CLEAR and related contrastive sentence-representation objectives for fairseq.

Pass this package's directory to ``fairseq-train --user-dir``; importing it
registers ``--task clear``, ``--criterion clear`` and ``--arch clear_roberta*``,
and makes fairseq load checkpoints safely under torch >= 2.6 (see
:mod:`fairseq_clear.checkpoint_safety`).
"""

__version__ = "0.1.0"

from .checkpoint_safety import allow_fairseq_checkpoints, patch_fairseq_loader

allow_fairseq_checkpoints()
patch_fairseq_loader()

from . import criterions, models, tasks  # noqa: E402,F401
