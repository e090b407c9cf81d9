"""Load fairseq checkpoints with ``torch.load(weights_only=True)``.

torch >= 2.6 unpickles checkpoints with ``weights_only=True`` by default, which
refuses any class not on an allow-list; fairseq checkpoints hold an
``argparse.Namespace`` (the model's legacy args) and sometimes numpy scalars
(metric values), so resuming and hub loading fail (fairseq issue #5610).
Importing :mod:`fairseq_clear` allow-lists exactly those plain-data classes.
``weights_only`` is never turned off: a checkpoint that names any other
global (for example one crafted to run a shell command when unpickled) is
refused with :class:`UnsafeCheckpointError`, and nothing in it runs.
"""

import argparse
import contextlib
import functools
import logging
import os
import pickle

import numpy as np
import torch

logger = logging.getLogger(__name__)


def _numpy_scalar_globals():
    classes = [np.dtype, np.core.multiarray.scalar]
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        for name in (
            "Float64DType", "Float32DType", "Float16DType",
            "Int64DType", "Int32DType", "BoolDType",
        ):
            if hasattr(dtypes, name):
                classes.append(getattr(dtypes, name))
    return classes


#: Plain-data classes found in fairseq checkpoints; nothing here can run code on load.
SAFE_GLOBALS = [argparse.Namespace] + _numpy_scalar_globals()


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint needs a class outside the allow-list to load; it was not loaded."""


class CorruptCheckpointError(RuntimeError):
    """A checkpoint file is truncated or damaged (e.g. copied or written when a run was killed)."""


def _looks_corrupt(path, error) -> bool:
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return False
    if isinstance(error, EOFError):
        return True
    text = str(error)
    if any(s in text for s in ("unexpected EOF", "corrupted", "central directory", "zip archive")):
        return True
    try:  # torch.save's zip format: the central directory at its end is gone
        import zipfile

        with open(path, "rb") as f:
            return f.read(2) == b"PK" and not zipfile.is_zipfile(path)
    except OSError:
        return False


def _corrupt(path, error) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"checkpoint '{path}' is truncated or corrupt ({type(error).__name__}: "
        f"{str(error).strip().splitlines()[0] if str(error).strip() else 'no detail'}). "
        "It was probably being written when a process was killed; restart from another "
        "checkpoint in the same directory (e.g. --restore-file checkpoint_<epoch>_<updates>.pt)."
    )


def allow_fairseq_checkpoints():
    """Add :data:`SAFE_GLOBALS` to torch's ``weights_only`` allow-list (idempotent)."""
    torch.serialization.add_safe_globals(SAFE_GLOBALS)


def safe_load(path, map_location="cpu"):
    """``torch.load(path, weights_only=True)`` with the allow-list and a clear refusal."""
    allow_fairseq_checkpoints()
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise _refusal(path, e) from None
    except (EOFError, OSError, RuntimeError) as e:
        if _looks_corrupt(path, e):
            raise _corrupt(path, e) from None
        raise


def _refusal(path, error) -> UnsafeCheckpointError:
    detail = str(error).split("WeightsUnpickler error:")[-1].strip().splitlines()[0]
    return UnsafeCheckpointError(
        f"refusing to load checkpoint '{path}': it needs a Python object that is not "
        f"plain data ({detail}). fairseq-clear loads checkpoints with "
        "torch.load(weights_only=True) and never falls back to full unpickling, "
        "since that can run arbitrary code. If you trust this file and know the class "
        "is harmless, add it with torch.serialization.add_safe_globals([...])."
    )


@contextlib.contextmanager
def _forced_weights_only():
    """Force ``weights_only=True`` for torch.load calls that do not pass it (fairseq's)."""
    saved = {k: os.environ.get(k) for k in ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")}
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def patch_fairseq_loader():
    """Make fairseq's ``load_checkpoint_to_cpu`` safe whatever the environment, and clear.

    fairseq calls ``torch.load`` without ``weights_only``; the wrapper adds the
    allow-list, forces ``weights_only=True`` even if the environment asks for
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``, and turns a refusal into a message
    that names the file.
    """
    from fairseq import checkpoint_utils

    original = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(original, "_clear_safe", False):
        return

    @functools.wraps(original)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        allow_fairseq_checkpoints()
        try:
            with _forced_weights_only():
                return original(path, *args, **kwargs)
        except pickle.UnpicklingError as e:
            raise _refusal(path, e) from None
        except (EOFError, OSError, RuntimeError) as e:
            if _looks_corrupt(path, e):
                raise _corrupt(path, e) from None
            raise

    load_checkpoint_to_cpu._clear_safe = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu


def patch_atomic_checkpoint_copy():
    """Make fairseq's copies to ``checkpoint_last.pt`` (and _best) atomic.

    fairseq writes each checkpoint once (atomically: ``.tmp``, then rename) and
    then copies it to ``checkpoint_last.pt`` with ``shutil.copyfile``, which
    truncates the previous file first: a kill during that copy leaves no intact
    ``checkpoint_last.pt`` to resume from. Local copies here go to a temporary
    name and are renamed over the target, so it is always old or new, never half.
    """
    import shutil

    from fairseq import checkpoint_utils

    base = checkpoint_utils.PathManager
    if getattr(base, "_clear_atomic_copy", False):
        return

    class AtomicCopyPathManager(base):
        _clear_atomic_copy = True

        @staticmethod
        def copy(src_path, dst_path, overwrite=False):
            if not base.supports_rename(dst_path) or (not overwrite and os.path.exists(dst_path)):
                return base.copy(src_path, dst_path, overwrite=overwrite)
            tmp = f"{dst_path}.tmp-copy-{os.getpid()}"
            try:
                shutil.copyfile(src_path, tmp)
                os.replace(tmp, dst_path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            return True

    checkpoint_utils.PathManager = AtomicCopyPathManager
