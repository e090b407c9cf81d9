"""File-level helpers for the checkpoint fixes: fsync, zip integrity, our own temporary names."""

import os
import re

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


#: our temporary names: NAME.tmp-copy-PID (copies) and NAME.tmp-save-PID-N (saves)
OWN_TEMP = re.compile(r"^(?P<target>.+)\.tmp-(?:copy|save)-(?P<pid>\d+)(?:-\d+)?$")


def own_temp_name(target, kind: str, attempt: int = None) -> str:
    suffix = f".tmp-{kind}-{os.getpid()}" + (f"-{attempt}" if attempt is not None else "")
    return f"{target}{suffix}"


def remove_own(path) -> None:
    """Remove a temporary file this process created (never anything else)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
