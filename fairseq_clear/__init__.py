"""fairseq-clear: CLEAR and related contrastive sentence-representation objectives for fairseq.

Pass this package's directory to ``fairseq-train --user-dir``; importing it
registers ``--task clear``, ``--criterion clear`` and ``--arch clear_roberta*``,
and makes fairseq load checkpoints safely under torch >= 2.6 (see
:mod:`fairseq_clear.checkpoint_safety`).
"""

__version__ = "0.1.0"

import logging as _logging

# importing fairseq runs logging.basicConfig(level=DEBUG) (in its
# wav2vec2_classification module), which floods a Python session with every
# library's debug messages; keep the root level the user had
_root_level = _logging.getLogger().level
import fairseq.models  # noqa: E402,F401

if _logging.getLogger().level == _logging.DEBUG != _root_level:
    _logging.getLogger().setLevel(_root_level)

from .checkpoint_safety import (  # noqa: E402
    allow_fairseq_checkpoints,
    patch_atomic_checkpoint_copy,
    patch_fairseq_loader,
)

from .compat import (  # noqa: E402
    patch_cpu_ddp,
    patch_cpu_torchrun,
    patch_heartbeat_timeout,
    patch_nan_detector,
    patch_prefetch_threads,
)

allow_fairseq_checkpoints()
patch_fairseq_loader()
patch_atomic_checkpoint_copy()
patch_nan_detector()
patch_cpu_torchrun()
patch_cpu_ddp()
patch_heartbeat_timeout()
patch_prefetch_threads()

from . import criterions, models, tasks  # noqa: E402,F401
