"""fairseq-clear: CLEAR and related contrastive sentence-representation objectives for fairseq.

Pass this package's directory to ``fairseq-train --user-dir``; importing it
registers ``--task clear``, ``--criterion clear`` and ``--arch clear_roberta*``
(and the other tasks), adds the plain-data classes fairseq checkpoints hold to torch's
``weights_only`` allow-list (without which fairseq cannot load a checkpoint on torch >= 2.6),
and installs the fixes of :mod:`fairseq_clear.fairseq_fixes`, which act only in runs of the
plugin's own tasks, criterions and models: fairseq is unchanged for every other task.
"""

__version__ = "0.1.0"  # the one version source: setup.py reads it

import logging as _logging

# importing fairseq runs logging.basicConfig(level=DEBUG) (in its
# wav2vec2_classification module), which floods a Python session with every
# library's debug messages; keep the root level the user had
_root_level = _logging.getLogger().level
import fairseq.models  # noqa: E402,F401

if _logging.getLogger().level == _logging.DEBUG != _root_level:
    _logging.getLogger().setLevel(_root_level)

from .checkpoint_safety import allow_fairseq_checkpoints  # noqa: E402
from .fairseq_fixes import install as _install_fairseq_fixes  # noqa: E402

allow_fairseq_checkpoints()
_install_fairseq_fixes()

from . import criterions, models, tasks  # noqa: E402,F401
