"""Write an export directory without ever deleting what we did not write.

The export is built in a temporary sibling (``.NAME.partial-XXXX``) and moved
into place only once it is complete (and verified, by the caller). A new or
empty ``--out`` is replaced by a single rename. A non-empty one is touched
only with ``overwrite=True``, and then only the entries that the previous
export listed in its manifest are replaced; any other file is left alone, and
a new file that would land on one of them is refused before anything changes.
"""

import contextlib
import json
import os
import shutil
import tempfile
from ..errors import FairseqClearError

#: the list of entries an export wrote, so that a later --overwrite replaces only those
MANIFEST = "export_manifest.json"


class OutputDirError(FairseqClearError, ValueError):
    """The output directory cannot be used as asked; the message names it."""


def check_output_dir(out_dir, overwrite: bool = False) -> None:
    """Refuse, before any work, an ``out_dir`` that an export may not write."""
    out_dir = os.path.abspath(os.path.expanduser(str(out_dir)))
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise OutputDirError(f"--out '{out_dir}' exists and is not a directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        raise OutputDirError(
            f"--out '{out_dir}' is not empty; choose a new directory, or pass --overwrite to "
            f"replace the files a previous export wrote there (listed in its {MANIFEST}; "
            "nothing else is touched)"
        )
    parent = os.path.dirname(out_dir)
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    if not os.access(parent if not os.path.isdir(out_dir) else out_dir, os.W_OK):
        raise OutputDirError(f"--out '{out_dir}': '{parent}' is not writable")


def _previous_entries(out_dir):
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.isfile(path):
        return set()
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f).get("entries", [])
    except (OSError, ValueError, AttributeError) as e:
        raise OutputDirError(f"'{path}' is not a readable export manifest ({e}); not overwriting") from None
    # only plain names inside out_dir: a manifest must not point anywhere else
    return {e for e in entries if isinstance(e, str) and e and os.sep not in e and e not in (".", "..")}


def _publish(staging, out_dir):
    entries = sorted(os.listdir(staging))
    with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
        json.dump({"entries": entries + [MANIFEST]}, f, indent=2)
    if os.path.isdir(out_dir) and not os.listdir(out_dir):
        os.rmdir(out_dir)  # empty: nothing of anyone's is lost
    if not os.path.exists(out_dir):
        os.rename(staging, out_dir)
        return
    ours = _previous_entries(out_dir)
    clashes = [e for e in entries + [MANIFEST] if os.path.lexists(os.path.join(out_dir, e)) and e not in ours]
    if clashes:
        raise OutputDirError(
            f"--out '{out_dir}' holds {', '.join(clashes)}, which a previous export did not write "
            f"(not in its {MANIFEST}); refusing to replace it: choose another directory"
        )
    for entry in sorted(ours):
        path = os.path.join(out_dir, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    for entry in entries + [MANIFEST]:
        os.replace(os.path.join(staging, entry), os.path.join(out_dir, entry))
    os.rmdir(staging)


@contextlib.contextmanager
def staged_output(out_dir, overwrite: bool = False):
    """Yield a temporary sibling directory; on success its content becomes ``out_dir``."""
    out_dir = os.path.abspath(os.path.expanduser(str(out_dir)))
    check_output_dir(out_dir, overwrite)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.partial-", dir=parent)
    try:
        yield staging
        _publish(staging, out_dir)
    finally:
        if os.path.isdir(staging):  # ours alone: created above, never renamed
            shutil.rmtree(staging)
