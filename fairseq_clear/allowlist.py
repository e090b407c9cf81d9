"""torch's ``weights_only`` allow-list of the plain-data classes fairseq checkpoints hold.

torch >= 2.6 unpickles with ``weights_only=True`` by default, which refuses any class not on
an allow-list; fairseq checkpoints hold an ``argparse.Namespace`` (the model's legacy args)
and sometimes numpy scalars (metric values), so fairseq cannot resume or load any checkpoint
(fairseq issue #5610). Importing the plugin adds exactly these classes, for every task: none
of them can run code when unpickled. A lone module (no package imports), so that a check of
fairseq's own tests can install the list without the plugin (tests/fairseq_suite/).
"""

import argparse

import numpy as np
import torch


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


def allow_fairseq_checkpoints():
    """Add :data:`SAFE_GLOBALS` to torch's ``weights_only`` allow-list (idempotent)."""
    torch.serialization.add_safe_globals(SAFE_GLOBALS)
