"""Write an export directory without ever deleting or overwriting what we did not write.

The export is built in a staging sibling (``.NAME.tmp-PID@HOST-XXXX``: atomic_files' temporary name,
marked as ours) and moved into place only once it is complete (and verified, by the caller). A new
or empty ``--out`` is replaced by a single rename. A non-empty one is touched only with
``overwrite=True``, and then file by file: a file of the new export may replace an existing
one only if that file's content is what the previous export recorded (its SHA-256 in
``export_manifest.json``); any other file there is refused before anything changes. Nothing
is deleted: files of the previous export that the new one does not write, and every file of
anyone else, stay where they are. Staging directories of our own left by a killed export are
removed on the next export into the same place (their process is gone, their marker is ours).

Replacing file by file cannot be one atomic step, so it is journalled in the manifest: before the
first file is replaced, the manifest lists the new files' SHA-256 as ``pending`` beside the
previous ones, and only once every file is in place is it rewritten without them. A run killed
in between leaves each file whole, either the previous or the new one; the directory says it
was interrupted (:func:`interrupted`), and the next run into it replaces both kinds.

A command whose output users rerun into the same place (``writer``, recorded in the manifest)
replaces its own previous output without ``overwrite``; anything else there is still refused.
A data directory, whose stale split or column a task would read, asks for ``remove_unwritten``:
the previous output's files (with their recorded content) that the new one does not write are
removed once the new ones are in place. A resumable pipeline that remakes a damaged output asks
for ``replace_changed``: a file that the new output writes, at a path the manifest lists, is
replaced whatever its content now.
"""

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile

from ..errors import FairseqClearError
from ..atomic_files import remove_stale_tmp, stale_tmp, tmp_prefix, write_json

logger = logging.getLogger(__name__)

#: the files an export wrote and their SHA-256, so that a later --overwrite can tell them apart
MANIFEST = "export_manifest.json"
MANIFEST_FORMAT = 2
#: a file in each staging directory that says it is ours (removed before the export is published)
STAGING_MARKER = ".fairseq-clear-staging"


class OutputDirError(FairseqClearError, ValueError):
    """The output directory cannot be used as asked; the message names it."""


def current_umask() -> int:
    """The process's umask, read without changing it where Linux says it (os.umask sets it to read it:
    a file another thread created in between would get no mask)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _resolved(out_dir) -> str:
    # a symlink to a directory means that directory
    return os.path.realpath(os.path.abspath(os.path.expanduser(str(out_dir))))


def check_output_dir(out_dir, overwrite: bool = False, writer=None, option: str = "--out", what: str = "export") -> None:
    """Refuse, before any work, an ``out_dir`` that an export may not write.

    ``writer``: the command writing it; a directory whose manifest names it is replaced as with
    ``overwrite`` (the command's own previous output), any other non-empty one is refused.
    ``option``: the command's name for ``out_dir``, ``what``: the name of what it writes ("export",
    "import"), in the messages."""
    out_dir = _resolved(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise OutputDirError(f"{option} '{out_dir}' exists and is not a directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        if writer is None:
            raise OutputDirError(
                f"{option} '{out_dir}' is not empty; choose a new directory, or pass --overwrite to "
                f"replace the files a previous {what} wrote there (recorded in its {MANIFEST}; "
                "nothing else is touched)"
            )
        if written_by(out_dir) != writer:
            raise OutputDirError(
                f"{option} '{out_dir}' is not empty and holds no {MANIFEST} of {writer} (the list of the files "
                "it wrote, which a rerun replaces); choose a new or empty directory (an output of a version "
                "without one: delete it yourself to rebuild it)"
            )
    parent = os.path.dirname(out_dir)
    while not os.path.isdir(parent):
        if os.path.lexists(parent):  # a file (or a dangling link) where a directory must be made
            raise OutputDirError(f"{option} '{out_dir}': '{parent}' exists and is not a directory")
        parent = os.path.dirname(parent)
    if not os.access(parent if not os.path.isdir(out_dir) else out_dir, os.W_OK):
        raise OutputDirError(f"{option} '{out_dir}': '{parent}' is not writable")


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


def _manifest(out_dir) -> dict:
    """The manifest in ``out_dir`` ({} when none); OutputDirError when it cannot be trusted."""
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.lexists(path):
        return {}
    try:
        if os.path.islink(path) or os.path.getsize(path) > 1 << 20:
            raise ValueError("not a small regular file")
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
        files = manifest["files"] if manifest.get("format") == MANIFEST_FORMAT else None
        if not isinstance(files, dict) or not isinstance(manifest.get("pending", {}), dict):
            raise ValueError("no per-file SHA-256 (written by an older fairseq-clear)")
    except (OSError, ValueError, TypeError, AttributeError, KeyError, RecursionError) as e:
        raise OutputDirError(
            f"'{path}' is not an export manifest this version can trust ({type(e).__name__}: {e}); "
            "the files there cannot be told apart from yours: not overwriting, choose another directory"
        ) from None
    return manifest


def _recorded(out_dir) -> dict:
    """{relative path: set of sha256} that the previous export in ``out_dir`` recorded, or {}
    (an interrupted one: both its previous and its new files')."""
    manifest = _manifest(out_dir)
    recorded = {}
    for files in (manifest.get("files", {}), manifest.get("pending", {})):
        for k, v in files.items():
            if isinstance(k, str) and isinstance(v, str):
                recorded.setdefault(k, set()).add(v)
    return recorded


def written_by(out_dir):
    """The ``writer`` that the manifest in ``out_dir`` names (None: none, or not one we trust)."""
    try:
        return _manifest(_resolved(out_dir)).get("writer")
    except OutputDirError:
        return None


def interrupted(out_dir) -> bool:
    """Whether a run replacing the files in ``out_dir`` was stopped half-way (its manifest still
    lists the new files as pending): each file is whole, but some are the previous run's."""
    try:
        return bool(_manifest(_resolved(out_dir)).get("pending"))
    except OutputDirError:
        return False


def _ours(out_dir, recorded, any_content=False) -> dict:
    """{relative path: sha256} of the files in ``out_dir`` that are regular files (no symlink on
    the way) holding what we recorded (``any_content``: whatever they hold now)."""
    ours = {}
    for rel, digests in recorded.items():
        target = os.path.join(out_dir, rel)
        inside = not os.path.isabs(rel) and os.path.normpath(rel) == rel and rel.split(os.sep)[0] != os.pardir
        if not inside or rel == MANIFEST or any(os.path.islink(p) for p in _parents(out_dir, rel)) \
                or os.path.islink(target) or not os.path.isfile(target):
            continue  # a manifest's names are not trusted: only plain files inside out_dir count
        digest = sha256(target)
        if any_content or digest in digests:
            ours[rel] = digest
    return ours


def _write_manifest(out_dir, files: dict, writer=None, pending=None):
    manifest = {"format": MANIFEST_FORMAT, "files": files}
    if writer:
        manifest["writer"] = writer
    if pending:
        manifest["pending"] = pending
    write_json(os.path.join(out_dir, MANIFEST), manifest)


def _publish(staging, out_dir, writer=None, option="--out", replace_changed=False, remove_unwritten=False,
             what="export"):
    # the marker stays until the end: a staging directory that a kill leaves is removed by the next run
    files = [rel for rel in _files(staging) if rel != STAGING_MARKER]
    new = {rel: sha256(os.path.join(staging, rel)) for rel in files}
    if os.path.isdir(out_dir) and not os.listdir(out_dir):
        os.rmdir(out_dir)  # empty: nothing of anyone's is lost
    if not os.path.exists(out_dir):
        _write_manifest(staging, new, writer)
        os.rename(staging, out_dir)
        os.unlink(os.path.join(out_dir, STAGING_MARKER))  # a kill just before leaves an empty hidden file
        return
    # ours now (previous files, or new ones of an interrupted run), each with its content
    recorded = _recorded(out_dir)
    ours = _ours(out_dir, recorded)
    if replace_changed:  # a damaged file of ours that the new output writes again: never one it does not
        ours.update(_ours(out_dir, {rel: recorded[rel] for rel in new if rel in recorded}, any_content=True))
    clashes = [rel for rel in files if os.path.lexists(os.path.join(out_dir, rel)) and rel not in ours]
    clashes += [rel for rel in files if any(
        os.path.lexists(p) and (os.path.islink(p) or not os.path.isdir(p))
        for p in _parents(out_dir, rel))]
    if clashes:
        raise OutputDirError(
            f"{option} '{out_dir}' holds {', '.join(sorted(set(clashes)))}, which a previous {what} did not "
            f"write (not recorded with this content in its {MANIFEST}); refusing to replace it: "
            "choose another directory"
        )
    remove_stale_tmp(out_dir, [MANIFEST])  # a killed run's half-written manifest
    _write_manifest(out_dir, ours, writer, pending=new)  # the journal: a kill from here on leaves both known
    for rel in files:
        target = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(os.path.join(staging, rel), target)
    kept = {rel: digest for rel, digest in ours.items() if rel not in new}
    if remove_unwritten:  # still listed in the journal: a kill while removing leaves them known
        for rel in sorted(kept):
            os.unlink(os.path.join(out_dir, rel))
            _remove_empty_parents(out_dir, rel)
        kept = {}
    _write_manifest(out_dir, {**kept, **new}, writer)  # still ours: a later run may replace them
    if kept:
        logger.info("left in %s from the previous export (this one does not write them): %s",
                    out_dir, ", ".join(sorted(kept)))
    shutil.rmtree(staging)  # only the empty directories of our own staging are left in it


def _parents(out_dir, rel):
    parts = rel.split(os.sep)
    return [os.path.join(out_dir, *parts[:i]) for i in range(1, len(parts))]


def _remove_empty_parents(out_dir, rel):
    # the folders that held only a removed file of ours (a task takes an empty column folder for one)
    for parent in reversed(_parents(out_dir, rel)):
        if os.listdir(parent):
            return
        os.rmdir(parent)


def remove_stale_staging(out_dir) -> list:
    """Remove staging directories of ``out_dir`` left by a killed export of ours; returns their names."""
    parent, name = os.path.split(out_dir)
    removed = []
    for entry in stale_tmp(parent, [name], own=False):
        path = os.path.join(parent, entry)
        if not os.path.islink(path) and os.path.isfile(os.path.join(path, STAGING_MARKER)):
            shutil.rmtree(path)
            removed.append(entry)
    if removed:
        logger.info("removed the staging directories of interrupted exports into %s: %s", out_dir, ", ".join(removed))
    return removed


@contextlib.contextmanager
def staged_output(out_dir, overwrite: bool = False, writer=None, option: str = "--out",
                  replace_changed: bool = False, remove_unwritten: bool = False, what: str = "export"):
    """Yield a temporary sibling directory; on success its content becomes ``out_dir``.

    ``writer``, ``option``, ``what``: see :func:`check_output_dir`; the writer is recorded in the manifest.
    ``replace_changed``, ``remove_unwritten``: see the module's docstring."""
    out_dir = _resolved(out_dir)
    check_output_dir(out_dir, overwrite, writer, option, what)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    remove_stale_staging(out_dir)
    staging = tempfile.mkdtemp(prefix=tmp_prefix(out_dir), dir=parent)
    os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp's 0700 would become the output's mode
    open(os.path.join(staging, STAGING_MARKER), "w").close()
    try:
        yield staging
        _publish(staging, out_dir, writer, option, replace_changed, remove_unwritten, what)
    finally:
        if os.path.isdir(staging):  # ours alone: created above, never renamed
            shutil.rmtree(staging)
