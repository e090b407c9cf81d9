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

    load_checkpoint_to_cpu._clear_safe = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu
