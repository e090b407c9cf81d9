"""One fairseq-clear run per --save-dir, and our orphaned temporary files cleaned up.

fairseq lets two runs write the same --save-dir; they overwrite each other's
checkpoints (and, with fairseq's fixed ``.tmp`` names, each other's half-written
files). In a fairseq-clear run (scope.py) the master rank takes an exclusive ``flock`` on
``SAVE_DIR/.fairseq_clear.lock`` where fairseq first touches the directory (its write check,
``verify_checkpoint_directory``, which writes and deletes ``SAVE_DIR/dummy``), and holds it
until the run ends; a second run stops there with an error naming the first (pid, host,
start time), before anything in the directory is written or deleted. A run whose scope opened
later (scope.component_built: fairseq-hydra-train) takes it where it restores its checkpoint
(checkpoint_loading.py), still before any checkpoint is read or written. Temporary files that
this package writes (``.NAME.tmp-PID@HOST...``, ``atomic_files``) and whose process is gone
(killed mid-save) are removed then; nothing else is. ``--no-save`` runs take no lock.
Limits: flock is per host; on a network file system shared by several hosts the
lock may not be seen by the other host.
"""

import errno
import fcntl
import json
import logging
import os
import socket
import time

from . import _patching, scope
from ..atomic_files import remove_stale_tmp
from ..errors import FairseqClearError

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"
LOCK_NAME = ".fairseq_clear.lock"
_held = {}  # save_dir -> open lock file, kept until release()


class SaveDirInUseError(FairseqClearError, RuntimeError):
    """Another live run holds the --save-dir lock."""


class SaveDirLockError(FairseqClearError, OSError):
    """The --save-dir lock file cannot be made or opened."""


def acquire(save_dir) -> None:
    save_dir = os.path.abspath(save_dir)
    if save_dir in _held:
        return
    path = os.path.join(save_dir, LOCK_NAME)
    try:
        os.makedirs(save_dir, exist_ok=True)
        f = open(path, "a+", encoding="utf-8")
    except OSError as e:  # a directory (or anything else) in the lock file's place, a read-only disk
        raise SaveDirLockError(f"--save-dir '{save_dir}': cannot open the run's lock file '{path}' "
                               f"({type(e).__name__}: {e.strerror or e}); move what is there away, or give "
                               "this run another --save-dir") from None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        raise SaveDirInUseError(
            f"--save-dir '{save_dir}' is in use by another fairseq-train run ({holder}); "
            "wait for it to finish, stop it, or give this run another --save-dir"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                        "started": time.strftime("%Y-%m-%d %H:%M:%S")}))
    f.flush()
    _held[save_dir] = f


def release_all() -> None:
    """Let go of every lock this process holds (the run ended)."""
    while _held:
        _, f = _held.popitem()
        f.close()


def remove_stale_temp_files(save_dir) -> list:
    """Remove our temporary files left by a process that no longer runs; returns their names."""
    removed = remove_stale_tmp(save_dir, own=False)
    if removed:
        logger.info("removed %d temporary file(s) of an interrupted save in %s: %s",
                    len(removed), save_dir, ", ".join(sorted(removed)))
    return removed


def take(checkpoint_cfg) -> None:
    """The lock of the run's --save-dir (``checkpoint_cfg``: the config's checkpoint section), and
    our orphaned temporary files there removed; once per run, nothing for --no-save."""
    if checkpoint_cfg is None or checkpoint_cfg.no_save:
        return
    save_dir = os.path.abspath(checkpoint_cfg.save_dir)
    if save_dir not in _held:
        acquire(save_dir)
        remove_stale_temp_files(save_dir)


def install():
    from fairseq import checkpoint_utils

    def make(fairseq_verify):
        def verify_checkpoint_directory(save_dir: str) -> None:
            cfg = scope.run_config()
            if cfg is not None:
                take(cfg.checkpoint)  # before fairseq writes (and deletes) SAVE_DIR/dummy
            return fairseq_verify(save_dir)

        return verify_checkpoint_directory

    _patching.replace(checkpoint_utils, "verify_checkpoint_directory", make)
