"""fairseq's checkpoint loader: weights_only always, the config checked before anything is built.

fairseq calls ``torch.load`` without ``weights_only`` (torch >= 2.6 refuses the
Namespace in its checkpoints, fairseq issue #5610, and an environment variable
would turn unpickling of arbitrary code back on), and builds whatever model and task a
checkpoint's config names. The checks themselves live in :mod:`fairseq_clear.checkpoint_safety`.
"""

import functools

from ..checkpoint_safety import (
    _forced_weights_only,
    _peek_state,
    allow_fairseq_checkpoints,
    check_checkpoint_config,
    load_errors_named,
    verify_integrity,
)
from ._version import check_version

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def apply():
    """Make fairseq's ``load_checkpoint_to_cpu`` safe whatever the environment, and clear.

    fairseq calls ``torch.load`` without ``weights_only``; the wrapper adds the
    allow-list, forces ``weights_only=True`` even if the environment asks for
    it (see checkpoint_safety._forced_weights_only), and turns a refusal into a message
    that names the file. Before fairseq reads the config, the config is checked
    by :func:`check_checkpoint_config` and the file's CRC-32s by :func:`verify_integrity`.
    """
    from fairseq import checkpoint_utils

    check_version(__name__, WRITTEN_FOR)
    original = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(original, "_clear_safe", False):
        return

    @functools.wraps(original)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        allow_fairseq_checkpoints()
        with load_errors_named(path), _forced_weights_only():
            local = checkpoint_utils.PathManager.get_local_path(path)
            verify_integrity(local)
            check_checkpoint_config(_peek_state(local), path)
            return original(path, *args, **kwargs)

    load_checkpoint_to_cpu._clear_safe = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu
