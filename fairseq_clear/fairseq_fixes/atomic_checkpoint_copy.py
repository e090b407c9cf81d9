"""fairseq's copies of a checkpoint (to checkpoint_last.pt, _best, ...) are atomic and verified.

fairseq writes each checkpoint once and then copies it with ``shutil.copyfile``,
which truncates the target first: a kill during that copy leaves no intact
``checkpoint_last.pt``. Copies here go to a temporary name of this process, are
fsync'ed and checked (same size, complete zip with matching CRC-32s) and only then
renamed over the target, so it is always the old or the new file, never half.
Outside a fairseq-clear run (scope.py) fairseq's own ``PathManager.copy``.
"""

import logging
import os
import shutil

from . import _patching, scope
from ._durable_io import fsync_dir, fsync_file, is_zip, zip_damage
from ..atomic_files import atomic_path
from ..errors import FairseqClearError

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


class CheckpointCopyError(FairseqClearError, OSError):
    """A copy did not reproduce its source; the target was left as it was."""


def atomic_copy(src_path, dst_path) -> None:
    with atomic_path(dst_path, "copy") as tmp:
        shutil.copyfile(src_path, tmp)
        fsync_file(tmp)
        if os.path.getsize(tmp) != os.path.getsize(src_path):
            raise CheckpointCopyError(f"copy of '{src_path}' to '{dst_path}' is incomplete")
        if is_zip(src_path):
            damage = zip_damage(tmp)
            if damage:
                raise CheckpointCopyError(f"copy of '{src_path}' to '{dst_path}': {damage}")
    fsync_dir(os.path.dirname(os.path.abspath(dst_path)))


def install():
    from fairseq import checkpoint_utils

    def make(base):
        class AtomicCopyPathManager(base):
            @staticmethod
            def copy(src_path, dst_path, overwrite=False):
                if (not scope.active() or not base.supports_rename(dst_path)
                        or (not overwrite and os.path.exists(dst_path))):
                    return base.copy(src_path, dst_path, overwrite=overwrite)
                atomic_copy(src_path, dst_path)
                return True

        return AtomicCopyPathManager

    # checkpoint_utils' own name for iopath's PathManager: fairseq copies checkpoints through it
    _patching.replace(checkpoint_utils, "PathManager", make)
