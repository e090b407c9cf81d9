"""A checkpoint replaces the previous one only once it is complete, verified and on disk.

fairseq's ``torch_persistent_save`` writes ``NAME.tmp`` and retries ``torch.save``
up to three times *on the same open file*: after a transient disk-full the retry
appends a second archive to the half-written first, the run logs "Saved
checkpoint", renames the unloadable file over the previous good one and exits 0.
Here every attempt writes a fresh file under a name of its own process, which is
flushed, fsync'ed and checked (complete zip, every record's CRC-32) before the
rename; the directory is fsync'ed after it. A failed attempt never touches the
previous file; after the last one the save fails loudly.
Limits: ``--write-checkpoints-asynchronously`` and non-local (PathManager)
destinations keep fairseq's own path. Outside a fairseq-clear run (scope.py) fairseq's own.
"""

import logging
import os
import time

import torch

from . import _patching, scope
from ._durable_io import fsync_dir, zip_damage
from ..atomic_files import atomic_path
from ..errors import FairseqClearError

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"
ATTEMPTS = 3
RETRY_WAIT_S = 2.5


class CheckpointWriteError(FairseqClearError, OSError):
    """A checkpoint could not be written completely; the previous file was left as it was."""


def durable_save(obj, filename, attempts: int = ATTEMPTS, wait_s: float = RETRY_WAIT_S) -> None:
    last = None
    for attempt in range(attempts):
        try:
            with atomic_path(filename, f"save{attempt}") as tmp:  # removed unless renamed
                with open(tmp, "wb") as f:
                    torch.save(obj, f)
                    f.flush()
                    os.fsync(f.fileno())
                damage = zip_damage(tmp)
                if damage:
                    raise CheckpointWriteError(f"written file {damage}")
            fsync_dir(os.path.dirname(os.path.abspath(filename)))
            return
        except Exception as e:  # disk full, I/O error, a damaged write
            last = e
            logger.warning("saving %s failed (attempt %d of %d): %s", filename, attempt + 1, attempts, e)
            if attempt + 1 < attempts:
                time.sleep(wait_s)
    raise CheckpointWriteError(
        f"could not write checkpoint '{filename}' after {attempts} attempts ({type(last).__name__}: {last}); "
        "the previous checkpoint files are unchanged"
    ) from last


def install():
    from fairseq import checkpoint_utils
    from fairseq.file_io import PathManager

    def make(fairseq_save):
        def torch_persistent_save(obj, filename, async_write: bool = False):
            if (not scope.active() or async_write or not PathManager.supports_rename(filename)
                    or "://" in str(filename)):
                return fairseq_save(obj, filename, async_write=async_write)
            return durable_save(obj, filename)

        torch_persistent_save.__wrapped__ = fairseq_save
        return torch_persistent_save

    _patching.replace(checkpoint_utils, "torch_persistent_save", make)
