"""``clear-plot LOG [LOG ...] --out curves.png``: a run's curves from its fairseq-train log.

The log must be written with ``--log-format json``; every mode's losses (loss, mlm_loss, cl_loss,
cl_acc) and, with ``--sts-validation``, STS-B dev Spearman are plotted over updates, one line per
log. The reading and plotting live in :mod:`fairseq_clear.evaluation.training_log`.
"""

import argparse
import json
import os

from ..evaluation.training_log import TrainingLogError, curves, plot_curves, read_log
from .hub_args import fail
from . import command


def get_parser():
    p = argparse.ArgumentParser(prog="clear-plot", description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", metavar="LOG", help="fairseq-train output written with --log-format json")
    p.add_argument("--out", required=True, help="the plot to write (.png, .pdf or .svg)")
    p.add_argument("--json", metavar="FILE", help="also write the curves as JSON: {log: {curve: [[update, value], ...]}}")
    return p


def run_names(paths):
    """A unique name per log: the shortest suffix of its path (folder/file at least) that no other
    log shares (run.sh's OUT/checkpoints/train.log of two runs: run1/checkpoints/train.log and
    run2/...); the same file given twice is named twice, numbered."""
    parts = [os.path.abspath(p).split(os.sep) for p in paths]
    names = []
    for i, path in enumerate(parts):
        others = [q for j, q in enumerate(parts) if j != i and q != path]
        k = min(2, len(path))
        while k < len(path) and any(q[-k:] == path[-k:] for q in others):
            k += 1
        names.append("/".join(path[-k:]).lstrip("/") or os.sep)
    seen = {}
    for i, name in enumerate(names):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            names[i] = f"{name} ({seen[name]})"
    return names


@command
def main(argv=None):
    args = get_parser().parse_args(argv)
    try:
        series = {name: curves(read_log(p)) for name, p in zip(run_names(args.logs), args.logs)}
    except TrainingLogError as e:
        fail(e)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(series, f, indent=1)
    path = plot_curves(series, args.out)
    if path is None:
        fail("clear-plot needs matplotlib (pip install 'fairseq-clear[plots]')")
    for name, c in series.items():
        last = ", ".join(f"{k} {v[-1][1]:g}" for k, v in c.items())
        print(f"{name}: {max(len(v) for v in c.values())} points; last: {last}")
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
