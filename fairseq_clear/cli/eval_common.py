"""What the evaluation commands (clear-eval-sts, clear-eval-senteval, clear-eval-multitask) share:
the check of a JSON output before any work, its atomic write, the rows' names and labels."""

import json
import math
import os

from .hub_args import fail

POOLING_LABELS = {"cls": "[CLS]", "mean": "mean"}


def row_names(args):
    """The rows' names, --checkpoint's (when given: --name, else its file name without .pt) then each
    --model's: unique, never one row over another (two exports both named 'export': a/export, b/export)."""
    from ..evaluation.row_names import unique_names

    paths = ([os.path.splitext(args.checkpoint)[0]] if args.checkpoint else []) + list(args.model or [])
    return unique_names(paths, given=[args.name] if args.checkpoint else [])


def jsonable(x):
    # NaN (a constant similarity) or Inf is not a score, nor JSON: write null
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def pooling_label(pooling: str) -> str:
    """[CLS], mean, and a truncated size as [CLS]@64."""
    base, _, size = pooling.partition("@")
    return POOLING_LABELS.get(base, base) + (f"@{size}" if size else "")


def check_json_output(path, option, checkpoint=None):
    """``path`` made absolute, if the JSON can be written there: in an existing, writable directory,
    not a directory itself, not the checkpoint."""
    from ..preprocessing.common import same_file
    from .embed import OutputError, check_output_path

    try:
        path = check_output_path(path, option)
    except OutputError as e:
        fail(e)
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        fail(f"{option} '{path}': directory '{directory}' does not exist")
    if checkpoint and os.path.exists(checkpoint) and same_file(path, checkpoint):
        fail(f"{option} '{path}' is the same file as --checkpoint '{checkpoint}'; it would overwrite the checkpoint")
    return path


def write_json(path, data):
    """Write ``data`` as JSON to ``path`` atomically: a temporary sibling, then one rename."""
    from ..atomic_files import atomic_write

    with atomic_write(path) as f:
        json.dump(data, f, indent=2, allow_nan=False)
        f.write("\n")
