"""``clear-eval-multitask``: seed 004's table (sentiment accuracy, paraphrase accuracy, STS Pearson,
Overall) for checkpoints of ``--task multitask``, one row each and an ensemble row for several.

    clear-eval-multitask CKPT [CKPT ...] --data DATA [--split valid] [--ensemble per-task] [--json OUT]
    clear-eval-multitask CKPT [CKPT ...] --data DATA --pair-tasks cosine   (seed 004 Table 1, §4.3)

The scoring lives in :mod:`fairseq_clear.evaluation.multitask.scoring`; this is its console script
(``python -m fairseq_clear.cli.eval_multitask`` without an install).
"""

import argparse
import logging
import sys

from ..evaluation.multitask.scoring import (BASELINES, ENSEMBLES, PAIR_MODES, THRESHOLD_ROWS, evaluate, evaluate_cosine,
                                    format_table, write_json)
from . import command
from .eval_common import check_json_output


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clear-eval-multitask", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("checkpoints", nargs="+", help="checkpoint files of --task multitask (several: an ensemble); "
                   "with --pair-tasks cosine, any checkpoint the hub loads (ours, clear-import-hf's model.pt)")
    p.add_argument("--data", required=True, help="clear-prepare-multitask's data directory (the model's tokenizer)")
    p.add_argument("--split", default="valid", help="the split to score (valid = the dev sets; test when labelled)")
    p.add_argument("--ensemble", choices=ENSEMBLES, default="per-task",
                   help="several checkpoints: per-task = each task from the checkpoint best at it on --select-split "
                   "(seed 004 §4.2, Table 2), average = mean of their probabilities and cosines")
    p.add_argument("--select-split", default="valid", help="per-task ensemble: the split that picks each task's model")
    p.add_argument("--pair-tasks", choices=PAIR_MODES, default="heads",
                   help="heads = each task from its head; cosine = seed 004's Table 1 configuration and §4.3 baseline: "
                   "sentiment from the checkpoint's sentiment head (n/a without one, and then no Overall), paraphrase "
                   "and STS from the cosine of the two sentences' [CLS] vectors (the encoder's output, no pair heads, "
                   "no projection): STS = its Pearson r with the scores, paraphrase = accuracy of cosine > the threshold "
                   "maximising accuracy on --threshold-split (a midpoint between adjacent cosines; the seed does not "
                   "say how it chose one). One row per checkpoint, no ensemble")
    p.add_argument("--baseline", choices=BASELINES,
                   help="seed 004 §4.3's baseline: the same as --pair-tasks cosine, given 'the minBERT model trained on "
                   "the SST dataset' (a --tasks sentiment checkpoint: its classifier is the baseline's sentiment)")
    p.add_argument("--threshold-split", default="train",
                   help="--pair-tasks cosine: the split whose paraphrase cosines choose the threshold (the scored "
                   "split would make its accuracy optimistic)")
    p.add_argument("--threshold-rows", type=int, default=THRESHOLD_ROWS,
                   help="--pair-tasks cosine: at most this many rows of --threshold-split choose the threshold (a fixed "
                   "random sample; 0 = all)")
    p.add_argument("--batch-size", type=int, default=64, help="rows per forward pass")
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--json", metavar="FILE", help="also write the rows, the ensemble and its predictions as JSON")
    return p


@command
def main(argv=None):
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.WARNING, stream=sys.stderr)
    args = build_parser().parse_args(argv)
    if args.json:  # before the models load and score: a place it cannot be written fails now
        for checkpoint in args.checkpoints:
            args.json = check_json_output(args.json, "--json", checkpoint)
    if args.baseline or args.pair_tasks == "cosine":
        result = evaluate_cosine(args.checkpoints, args.data, args.split, args.threshold_split, args.threshold_rows,
                                 args.batch_size, args.device)
    else:
        result = evaluate(args.checkpoints, args.data, args.split, args.ensemble, args.select_split,
                          args.batch_size, args.device)
    print(format_table(result))
    if args.json:
        write_json(result, args.json)


if __name__ == "__main__":
    main()
