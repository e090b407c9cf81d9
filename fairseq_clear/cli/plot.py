"""``clear-plot LOG [LOG ...] --out curves.png``: a run's curves from its fairseq-train log.

The log must be written with ``--log-format json``; every mode's losses (loss, mlm_loss, cl_loss,
cl_acc) and, with ``--sts-validation``, STS-B dev Spearman are plotted over updates, one line per
log. The reading and plotting live in :mod:`fairseq_clear.evaluation.training_log`.
"""

import argparse

from ..evaluation.row_names import unique_names
from ..evaluation.training_log import TrainingLogError, curves, plot_curves, read_log
from ..atomic_files import write_json
from ..preprocessing.common import check_outputs, disk_full_reported
from .hub_args import fail
from . import command


def get_parser():
    p = argparse.ArgumentParser(prog="clear-plot", description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", metavar="LOG", help="fairseq-train output written with --log-format json")
    p.add_argument("--out", required=True, help="the plot to write (.png, .pdf or .svg)")
    p.add_argument("--json", metavar="FILE", help="also write the curves as JSON: {log: {curve: [[update, value], ...]}}")
    return p


@command
def main(argv=None):
    args = get_parser().parse_args(argv)
    outputs = {"--out": args.out, **({"--json": args.json} if args.json else {})}
    check_outputs(outputs, {"LOG": args.logs})  # before the work: never over a log or each other
    try:
        # run.sh's logs are all OUT/checkpoints/train.log: a name is the path's end from the run's folder
        series = {name: curves(read_log(p)) for name, p in zip(unique_names(args.logs, min_parts=2), args.logs)}
    except TrainingLogError as e:
        fail(e)
    if args.json:
        with disk_full_reported(args.json, "--json"):
            write_json(args.json, series)
    with disk_full_reported(args.out, "--out"):
        path = plot_curves(series, args.out)
    if path is None:
        fail("clear-plot needs matplotlib (pip install 'fairseq-clear[plots]')")
    for name, c in series.items():
        last = ", ".join(f"{k} {v[-1][1]:g}" for k, v in c.items())
        print(f"{name}: {max(len(v) for v in c.values())} points; last: {last}")
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
