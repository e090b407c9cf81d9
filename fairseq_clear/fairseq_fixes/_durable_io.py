"""File-level helpers for the checkpoint fixes: fsync and zip integrity (their temporary names:
``atomic_files``)."""

import os

from ..checkpoint_safety import is_zip, zip_damage  # noqa: F401  (used by the checkpoint fixes)


def fsync_file(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path) -> None:
    """Make a rename in ``path`` durable (power loss); a no-op where directories cannot be opened."""
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
