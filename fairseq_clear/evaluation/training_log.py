"""fairseq-train's JSON log (``--log-format json``) as records, and a plot of a run's curves.

One reader (:func:`records`, also GLUE's summary's, ``benchmarks/``' and the tests') and one plot
for the demo, ``clear-plot`` and users: the training losses of every
mode (loss, mlm_loss, cl_loss, cl_acc) over updates and, when the run validated with
``--sts-validation``, STS-B dev Spearman (sts_b_spearman) over updates.
"""

import json
import os
from typing import Dict, Iterable, List, Optional, Sequence
from ..errors import FairseqClearError

#: what is plotted when present, with its axis title
CURVES = {
    "loss": "loss (bits)",
    "mlm_loss": "MLM loss (bits)",
    "cl_loss": "contrastive loss (bits)",
    "cl_acc": "contrastive accuracy (%)",
    "sts_b_spearman": "STS-B dev Spearman x100",
}


class TrainingLogError(FairseqClearError, ValueError):
    """A log has no fairseq JSON records; the message names the file."""


def records(lines: Iterable[str], *tags: str) -> List[dict]:
    """The stats fairseq logged under any of ``tags`` (default ``train_inner``: every --log-interval
    updates; ``train``: an epoch's end; ``valid`` or another subset's name: a validation), in log
    order: a ``--log-format json`` line's JSON (fairseq-train's "| tag |" lines, fairseq-hydra-train's
    "[tag][INFO] - " ones) or a ``simple`` line's values. Other lines, and one cut by a crash, are
    skipped. The one reader of fairseq's log: the package's, ``benchmarks/``' and the tests'."""
    tags = tags or ("train_inner",)
    out = []
    for line in lines:
        tag = next((t for t in tags if f"| {t} |" in line or f"][{t}][" in line), None)
        record = _record(line, tag) if tag else None
        if record is not None:
            out.append(record)
    return out


def read_log(path: str) -> Dict[str, List[dict]]:
    """``{"train": [...], "valid": [...]}``: the ``train_inner`` and ``valid`` records of a
    fairseq-train log written with ``--log-format json`` or ``simple`` (other lines are ignored)."""
    if not os.path.isfile(path):
        raise TrainingLogError(f"log '{path}' does not exist")
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    # the json format prefixes validation stats with the subset ("valid_sts_b_spearman")
    valid = [{k[len("valid_"):] if k.startswith("valid_") else k: v for k, v in r.items()}
             for r in records(lines, "valid")]
    out = {"train": [r for r in records(lines) if "num_updates" in r],
           "valid": [r for r in valid if "num_updates" in r]}
    if not out["train"] and not out["valid"]:
        raise TrainingLogError(
            f"'{path}' holds no train_inner or valid records: is it fairseq-train's output "
            "(--log-format json or simple)?"
        )
    return out


def _record(line: str, tag: str) -> Optional[dict]:
    """The stats of one log line: --log-format json ({...}) or simple (train_inner: 'k=v, k=v';
    an epoch's end or a validation: '| k v | k v')."""
    if "{" in line:
        try:
            record = json.loads(line[line.index("{"):])
        except ValueError:
            return None  # a line cut by a crash
        return record if isinstance(record, dict) else None
    if f"| {tag} |" not in line:
        return None
    tail = line.split(f"| {tag} |", 1)[1]
    pairs = ([p.split("=", 1) for p in tail.split(", ") if "=" in p] if tag == "train_inner"
             else [p.strip().split(" ", 1) for p in tail.split(" | ") if " " in p.strip()])
    record = {}
    for key, value in pairs:
        key = key.strip().split()[-1] if key.strip() else key
        try:
            record[key] = float(value.strip())
        except ValueError:
            continue
    return record or None


def curves(log: Dict[str, List[dict]], keys: Optional[Sequence[str]] = None) -> Dict[str, List[tuple]]:
    """``key -> [(update, value), ...]`` for each of ``keys`` (default: ``CURVES``) the log holds."""
    out = {}
    for key in keys or CURVES:
        for kind in ("train", "valid"):
            points = [(int(float(r["num_updates"])), float(r[key])) for r in log[kind] if key in r]
            if points:
                out[key if kind == "train" or key == "sts_b_spearman" else f"valid_{key}"] = points
                break
    return out


def plot_curves(series: Dict[str, Dict[str, List[tuple]]], path: str) -> Optional[str]:
    """One panel per curve, one line per run (``series``: run name -> :func:`curves`); returns
    ``path``, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    keys = [k for k in list(CURVES) + sorted({k for c in series.values() for k in c}) if any(k in c for c in series.values())]
    keys = list(dict.fromkeys(keys))
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.2), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for name, c in series.items():
            if key in c:
                xs, ys = zip(*c[key])
                ax.plot(xs, ys, lw=1, marker="o" if len(xs) < 20 else None, ms=3, label=name)
        ax.set_xlabel("update")
        ax.set_title(CURVES.get(key, key))
        ax.grid(alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=7)
    fig.tight_layout()
    from ..atomic_files import atomic_write

    with atomic_write(path, "wb") as f:  # a kill or a full disk leaves the previous plot
        fig.savefig(f, format=os.path.splitext(path)[1][1:].lower() or "png", dpi=120)
    plt.close(fig)
    return path
