"""Write an export directory without ever deleting or overwriting what we did not write.

The export is built in a staging sibling (``.NAME.partial-PID-XXXX``, marked as ours) and
moved into place only once it is complete (and verified, by the caller). A new or empty
``--out`` is replaced by a single rename. A non-empty one is touched only with
``overwrite=True``, and then file by file: a file of the new export may replace an existing
one only if that file's content is what the previous export recorded (its SHA-256 in
``export_manifest.json``); any other file there is refused before anything changes. Nothing
is deleted: files of the previous export that the new one does not write, and every file of
anyone else, stay where they are. Staging directories of our own left by a killed export are
removed on the next export into the same place (their process is gone, their marker is ours).
"""

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile

from ..errors import FairseqClearError

logger = logging.getLogger(__name__)

#: the files an export wrote and their SHA-256, so that a later --overwrite can tell them apart
MANIFEST = "export_manifest.json"
MANIFEST_FORMAT = 2
#: a file in each staging directory that says it is ours (removed before the export is published)
STAGING_MARKER = ".fairseq-clear-staging"


class OutputDirError(FairseqClearError, ValueError):
    """The output directory cannot be used as asked; the message names it."""


def _resolved(out_dir) -> str:
    # a symlink to a directory means that directory
    return os.path.realpath(os.path.abspath(os.path.expanduser(str(out_dir))))


def check_output_dir(out_dir, overwrite: bool = False) -> None:
    """Refuse, before any work, an ``out_dir`` that an export may not write."""
    out_dir = _resolved(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise OutputDirError(f"--out '{out_dir}' exists and is not a directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        raise OutputDirError(
            f"--out '{out_dir}' is not empty; choose a new directory, or pass --overwrite to "
            f"replace the files a previous export wrote there (recorded in its {MANIFEST}; "
            "nothing else is touched)"
        )
    parent = os.path.dirname(out_dir)
    while not os.path.isdir(parent):
        if os.path.lexists(parent):  # a file (or a dangling link) where a directory must be made
            raise OutputDirError(f"--out '{out_dir}': '{parent}' exists and is not a directory")
        parent = os.path.dirname(parent)
    if not os.access(parent if not os.path.isdir(out_dir) else out_dir, os.W_OK):
        raise OutputDirError(f"--out '{out_dir}': '{parent}' is not writable")


def sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(root) -> list:
    """Relative paths of every file under ``root`` (symlinks are not followed)."""
    found = []
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            found.append(os.path.relpath(os.path.join(directory, name), root))
    return found


def _recorded(out_dir) -> dict:
    """{relative path: sha256} that the previous export in ``out_dir`` recorded, or {}."""
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.lexists(path):
        return {}
    try:
        if os.path.islink(path) or os.path.getsize(path) > 1 << 20:
            raise ValueError("not a small regular file")
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
        files = manifest["files"] if manifest.get("format") == MANIFEST_FORMAT else None
        if not isinstance(files, dict):
            raise ValueError("no per-file SHA-256 (written by an older fairseq-clear)")
    except (OSError, ValueError, TypeError, AttributeError, KeyError, RecursionError) as e:
        raise OutputDirError(
            f"'{path}' is not an export manifest this version can trust ({type(e).__name__}: {e}); "
            "the files there cannot be told apart from yours: not overwriting, choose another directory"
        ) from None
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def _is_ours(out_dir, rel, recorded) -> bool:
    """Whether ``out_dir/rel`` is a regular file (no symlink on the way) holding what we recorded."""
    parts = rel.split(os.sep)
    for i in range(1, len(parts)):
        if os.path.islink(os.path.join(out_dir, *parts[:i])):
            return False
    target = os.path.join(out_dir, rel)
    return (not os.path.islink(target) and os.path.isfile(target) and rel in recorded
            and sha256(target) == recorded[rel])


def _publish(staging, out_dir):
    os.unlink(os.path.join(staging, STAGING_MARKER))
    files = _files(staging)
    with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
        json.dump({"format": MANIFEST_FORMAT, "files": {rel: sha256(os.path.join(staging, rel)) for rel in files}},
                  f, indent=2)
    if os.path.isdir(out_dir) and not os.listdir(out_dir):
        os.rmdir(out_dir)  # empty: nothing of anyone's is lost
    if not os.path.exists(out_dir):
        os.rename(staging, out_dir)
        return
    recorded = _recorded(out_dir)
    clashes = [rel for rel in files if os.path.lexists(os.path.join(out_dir, rel))
               and not _is_ours(out_dir, rel, recorded)]
    clashes += [rel for rel in files if any(
        os.path.lexists(p) and (os.path.islink(p) or not os.path.isdir(p))
        for p in _parents(out_dir, rel))]
    if clashes:
        raise OutputDirError(
            f"--out '{out_dir}' holds {', '.join(sorted(set(clashes)))}, which a previous export did not "
            f"write (not recorded with this content in its {MANIFEST}); refusing to replace it: "
            "choose another directory"
        )
    for rel in files + [MANIFEST]:
        target = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(os.path.join(staging, rel), target)
    kept = sorted(rel for rel in recorded if rel not in files and os.path.lexists(os.path.join(out_dir, rel)))
    if kept:
        logger.info("left in %s from the previous export (this one does not write them): %s",
                    out_dir, ", ".join(kept))
    shutil.rmtree(staging)  # only the empty directories of our own staging are left in it


def _parents(out_dir, rel):
    parts = rel.split(os.sep)
    return [os.path.join(out_dir, *parts[:i]) for i in range(1, len(parts))]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_staging(out_dir) -> list:
    """Remove staging directories of ``out_dir`` left by a killed export of ours; returns their names."""
    parent, name = os.path.split(out_dir)
    pattern = re.compile(rf"^\.{re.escape(name)}\.partial-(\d+)-\w+$")
    removed = []
    for entry in sorted(os.listdir(parent)):
        m = pattern.match(entry)
        path = os.path.join(parent, entry)
        if (m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1)))
                and not os.path.islink(path) and os.path.isfile(os.path.join(path, STAGING_MARKER))):
            shutil.rmtree(path)
            removed.append(entry)
    if removed:
        logger.info("removed the staging directories of interrupted exports into %s: %s", out_dir, ", ".join(removed))
    return removed


@contextlib.contextmanager
def staged_output(out_dir, overwrite: bool = False):
    """Yield a temporary sibling directory; on success its content becomes ``out_dir``."""
    out_dir = _resolved(out_dir)
    check_output_dir(out_dir, overwrite)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    remove_stale_staging(out_dir)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.partial-{os.getpid()}-", dir=parent)
    open(os.path.join(staging, STAGING_MARKER), "w").close()
    try:
        yield staging
        _publish(staging, out_dir)
    finally:
        if os.path.isdir(staging):  # ours alone: created above, never renamed
            shutil.rmtree(staging)
