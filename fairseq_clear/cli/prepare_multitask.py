"""``clear-prepare-multitask``: seed 004's sentiment, paraphrase and STS data -> ``--task multitask``'s
data directory, tokenised with the model's own tokenizer.

The readers and the binarizing live in :mod:`fairseq_clear.preprocessing.multitask`; this is its
console script (``python -m fairseq_clear.cli.prepare_multitask`` without an install).
"""

import argparse
import logging
import sys

from ..preprocessing.multitask import TASKS, prepare, print_report
from . import command, whole_number


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="clear-prepare-multitask",
        description="GLUE SST-2 / MRPC or QQP / STS-B, or the CS224N ids-sst / quora / sts CSVs -> the binarized "
        "data of --task multitask.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--glue-dir", default="", help="GLUE's glue_data/ (SST-2, MRPC or QQP, STS-B)")
    p.add_argument("--cs224n-dir", default="", help="the CS224N default project's data/ (ids-sst-*, quora-*, sts-*.csv)")
    p.add_argument("--paraphrase", choices=("MRPC", "QQP"), default="QQP",
                   help="--glue-dir: the paraphrase task (seed 004: Quora, i.e. QQP)")
    p.add_argument("--tokenizer-from", required=True,
                   help="the directory whose dict.txt and tokenizer encode the text: an imported Hugging Face model "
                   "(clear-import-hf's output), the pre-training data-bin")
    p.add_argument("--out", required=True,
                   help="output data directory: new, empty, or an earlier output of this command, whose files (listed "
                   "in its export_manifest.json) a rerun replaces, leaving everything else there untouched; built in "
                   "a hidden sibling and moved in when complete")
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS), help="tasks to prepare")
    p.add_argument("--limit-train", type=whole_number(0), default=0, help="keep a random N rows of each train split (0 = all)")
    p.add_argument("--limit-valid", type=whole_number(0), default=0, help="keep a random N rows of each valid split (0 = all)")
    p.add_argument("--seed", type=int, default=1, help="seed of --limit-train / --limit-valid")
    p.add_argument("--workers", type=whole_number(1), default=1, help="processes that encode the rows (the output does not depend on it)")
    return p


@command
def main(argv=None):
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.WARNING, stream=sys.stderr)
    args = build_parser().parse_args(argv)
    summary = prepare(args)
    print_report(summary, args.out)


if __name__ == "__main__":
    main()
