"""Outputs written beside their target under one temporary name and renamed over it only when
complete, and the cleanup of what a killed process of ours left under that name.

The one temporary name is ``.NAME.tmp-PID@HOST`` beside NAME (a file or a directory), with ``-TAG``
after it where one process writes several (``.checkpoint_last.pt.tmp-812@1f3a9c0b-save0``) and what a
library appends to a prefix (``.spm.tmp-812@1f3a9c0b.model``); HOST is :data:`HOST`. An entry of this
pattern whose process is gone is ours to remove (:func:`remove_stale_tmp`); nothing else is. A
process's PID means something only on its own machine: on a folder that several machines share (a
network file system; clear-prepare's shards), an entry of another HOST is never judged by this
machine's processes, so never removed here (a name without HOST, of earlier versions: judged here).

Nothing here imports fairseq, torch or another module of the package: every folder may use it.
"""

import hashlib
import json
import os
import re
import shutil
import socket
from contextlib import contextmanager
from typing import Iterable, List, Optional

#: this machine in temporary names: 8 hex digits of a hash of its host name
HOST = hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
#: the one temporary-name pattern: ``.NAME.tmp-PID@HOST``, then ``-TAG`` or a library's ``.EXT``
TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.tmp-(?P<pid>\d+)(?:@(?P<host>[0-9a-f]{8}))?(?:[-.].*)?$")


def tmp_name(path: str, tag: str = "") -> str:
    """The temporary name beside ``path`` of this process (``tag``: one of several it writes)."""
    d, base = os.path.split(path)
    return os.path.join(d, f".{base}.tmp-{os.getpid()}@{HOST}" + (f"-{tag}" if tag else ""))


def tmp_prefix(path: str) -> str:
    """The temporary name of ``path`` as the prefix of tempfile's unique ones (``.NAME.tmp-PID-XXXX``)."""
    return os.path.basename(tmp_name(path)) + "-"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (one we may not signal does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_tmp(directory: str, names: Optional[Iterable[str]] = None, own: bool = True) -> List[str]:
    """The entries of ``directory`` under the temporary name whose process is gone; ``own``: this
    process's too (an earlier, failed attempt); ``names``: only those of these targets (a directory
    we share with the user may hold look-alikes that are not ours)."""
    names = None if names is None else set(names)
    try:
        entries = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    stale = []
    for entry in entries:
        m = TEMP_NAME.match(entry)
        if not m or (names is not None and m.group("target") not in names):
            continue
        pid = int(m.group("pid"))
        if pid >= 2 ** 31:  # no process has it (os.kill cannot even ask): not a name of ours
            continue
        if m.group("host") not in (None, HOST):  # another machine's process: not ours to judge
            continue
        if (own and pid == os.getpid()) or (pid != os.getpid() and not pid_alive(pid)):
            stale.append(entry)
    return stale


def remove_stale_tmp(directory: str, names: Optional[Iterable[str]] = None, own: bool = True) -> List[str]:
    """Remove what :func:`stale_tmp` lists (files, and directories with their content); returns their names."""
    removed = stale_tmp(directory, names, own)
    for entry in removed:
        _remove(os.path.join(directory, entry))
    return removed


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


@contextmanager
def atomic_path(path: str, tag: str = ""):
    """A temporary path beside ``path`` for a writer that creates it itself (a library's save, a
    directory); renamed over ``path`` if the block succeeds, removed otherwise (``path`` then stays
    as it was). What a killed writer of ``path`` left is removed first. A directory replaces only a
    missing or empty ``path``."""
    directory, base = os.path.split(os.path.abspath(path))
    remove_stale_tmp(directory, [base], own=False)
    tmp = tmp_name(path, tag)
    _remove(tmp)  # this process's own name: an earlier attempt's
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        _remove(tmp)  # a failed block's (nothing is left there after the rename)


@contextmanager
def atomic_write(path: str, mode: str = "w", encoding: Optional[str] = "utf-8", tag: str = ""):
    """Write to a temporary file, flushed to disk, and rename it to ``path`` only if the block succeeds."""
    kwargs = {"encoding": encoding, "newline": "\n"} if "b" not in mode else {}
    with atomic_path(path, tag) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


def write_json(path: str, obj):
    with atomic_write(path) as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, sort_keys=False)
        f.write("\n")
