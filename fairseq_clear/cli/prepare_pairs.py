"""``clear-prepare-pairs``: labelled sentence pairs -> the binarized data of ``--task contrastive_pairs``.

The readers and the binarizing live in :mod:`fairseq_clear.preprocessing.pairs`; this is its
console script.
"""

import argparse
import logging
import sys

from ..preprocessing.pairs import FORMATS, prepare, print_report
from . import command, whole_number


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="clear-prepare-pairs",
        description="Labelled sentence pairs (SimCSE NLI csv, SNLI/MultiNLI jsonl, STS-B, "
        "MRPC, SICK, Quora) -> the binarized data of --task contrastive_pairs.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--train", nargs="+", required=True, help="training file(s), concatenated")
    p.add_argument("--valid", nargs="+", default=[], help="validation file(s)")
    p.add_argument("--test", nargs="+", default=[], help="test file(s)")
    p.add_argument("--format", choices=FORMATS, default="auto", help="input format")
    p.add_argument(
        "--data", "--tokenizer-from", dest="data", required=True,
        help="the directory whose tokenizer and dict.txt the pairs are encoded with: the "
        "pre-training data-bin, or a model directory (clear-import-hf's output, fairseq's "
        "roberta.base with encoder.json + vocab.bpe)",
    )
    p.add_argument("--sentencepiece-model", default="",
                   help="a sentencepiece model to use instead of DATA's tokenizer")
    p.add_argument("--dict", default="", help="default: DATA/dict.txt")
    p.add_argument("--out", required=True,
                   help="output data directory: new, empty, or an earlier output of this command, whose files (listed "
                   "in its export_manifest.json) a rerun replaces, leaving everything else there untouched; built in "
                   "a hidden sibling and moved in when complete")
    p.add_argument(
        "--sts-threshold", type=float, default=4.0,
        help="stsb: pairs scoring above this are positives (CLSR: 4; GLUE STS-B train has 1,052 such pairs)",
    )
    p.add_argument(
        "--sick-score-threshold", type=float, default=None,
        help="sick: use relatedness > this (SICK-R, 1-5) for positives instead of ENTAILMENT",
    )
    hard = p.add_mutually_exclusive_group()
    hard.add_argument(
        "--hard-negatives", dest="hard_negatives", action="store_true", default=None,
        help="add a hard-negative column (default for simcse-csv with hard_neg and nli-jsonl)",
    )
    hard.add_argument("--no-hard-negatives", dest="hard_negatives", action="store_false")
    p.add_argument(
        "--negative-pairs", action="store_true",
        help="seed 004 §4.1: keep the label-0 pairs (Quora / MRPC non-paraphrases, NLI contradictions) as rows "
        "and write OUT/label/SPLIT.label (1/0), for --task contrastive_pairs --negative-pairs, which maximises "
        "their contrastive loss",
    )
    p.add_argument("--workers", type=whole_number(1), default=1, help="processes that encode the rows (the output does not depend on it)")
    return p


@command
def main(argv=None):
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.INFO, stream=sys.stderr)
    args = build_parser().parse_args(argv)
    summary = prepare(args)  # an error of the input or options: one error line (command)
    print_report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
