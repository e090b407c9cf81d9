"""``clear-mine-negatives``: (anchor, positive) pairs -> (anchor, positive, hard negative) rows.

    clear-mine-negatives --train stsb_train.tsv --checkpoint model/model.pt --out mined.csv
    clear-prepare-pairs --train mined.csv --data DATA --out pairs-bin   # hard_neg column used

Reads every format ``clear-prepare-pairs`` reads, embeds with any model the hub loads, and
writes SimCSE's ``sent0,sent1,hard_neg`` csv, a JSON report (counts, rules, the similarity
histogram) and its plot. The rules are those of sentence-transformers' ``mine_hard_negatives``
(:mod:`fairseq_clear.mining`).
"""

import argparse
import logging
import os
import sys

from ..errors import NotUtf8Error
from ..mining import MiningError, MiningRules, mine, plot, summary, write_rows
from ..atomic_files import write_json
from ..preprocessing.common import PrepareError, check_outputs, disk_full_reported, not_writable
from ..preprocessing.pairs import FORMATS, assemble, read_split
from . import command
from .hub_args import add_checkpoint_args, add_embedding_args, load_hub, setup_logging

logger = logging.getLogger("clear-mine-negatives")


def optional_float(text):
    return None if text in ("", "none", "None") else float(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="clear-mine-negatives",
        description="Mine hard negatives for (anchor, positive) pairs with a trained or imported encoder; "
        "writes the sent0,sent1,hard_neg csv that clear-prepare-pairs reads (rules of sentence-transformers' "
        "mine_hard_negatives, whose defaults these are).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    data = p.add_argument_group("input and output")
    data.add_argument("--train", nargs="+", required=True, help="pair file(s), any clear-prepare-pairs format")
    data.add_argument("--format", choices=FORMATS, default="auto", help="input format (as clear-prepare-pairs)")
    data.add_argument("--sts-threshold", type=float, default=4.0, help="stsb: pairs above this are positives")
    data.add_argument("--sick-score-threshold", type=float, default=None,
                      help="sick: relatedness above this instead of ENTAILMENT")
    data.add_argument("--corpus", metavar="FILE",
                      help="search this corpus (one text per line) as well as the positives (default: the positives)")
    data.add_argument("--out", required=True, metavar="CSV", help="the sent0,sent1,hard_neg csv to write")
    data.add_argument("--report", metavar="JSON", help="counts, rules and histogram (default: OUT with .json)")
    data.add_argument("--plot", metavar="PNG", help="similarity histogram (default: OUT with .png)")
    add_checkpoint_args(p)
    add_embedding_args(p, "pooling (default: the model's --sentence-pooling)")
    rules = p.add_argument_group("rules (sentence-transformers' mine_hard_negatives)")
    rules.add_argument("--num-negatives", type=int, default=3, help="negatives per anchor")
    rules.add_argument("--range-min", type=int, default=0, help="skip this many best candidates")
    rules.add_argument("--range-max", type=int, default=None,
                       help="consider candidates up to this rank (default, sentence-transformers': range-min + "
                       "num-negatives (x10 with a margin or --max-score) + the most pairs an anchor has)")
    rules.add_argument("--max-score", type=optional_float, default=None, help="drop candidates scoring above")
    rules.add_argument("--min-score", type=optional_float, default=None, help="drop candidates scoring below")
    rules.add_argument("--absolute-margin", type=optional_float, default=None,
                       help="drop candidates with score + margin > the positive's score")
    rules.add_argument("--relative-margin", type=optional_float, default=None,
                       help="drop candidates with score > positive - |positive| x margin")
    rules.add_argument("--sampling-strategy", choices=("top", "random"), default="top",
                       help="the best candidates left, or a random choice of them")
    rules.add_argument("--seed", type=int, default=12, help="--sampling-strategy random's seed")
    run = p.add_argument_group("running")
    run.add_argument("--chunk-size", type=int, default=10000,
                     help="texts embedded and corpus vectors searched at a time (vectors wait on disk)")
    run.add_argument("--backend", choices=("torch", "faiss"), default="torch", help="the search index's backend")
    run.add_argument("--work-dir", help="where the vectors wait: (anchors + corpus texts) x dimension x 4 bytes, "
                     "claimed when the first vectors arrive (default: the system's temporary directory, often "
                     "a small tmpfs)")
    return p


@command
def main(argv=None):
    setup_logging()
    args = build_parser().parse_args(argv)
    rules = MiningRules(args.num_negatives, args.range_min, args.range_max, args.max_score, args.min_score,
                        args.absolute_margin, args.relative_margin, args.sampling_strategy, args.seed)
    rules.check()
    if args.batch_size < 1:
        raise MiningError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.chunk_size < 1:
        raise MiningError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if args.work_dir:
        problem = not_writable(args.work_dir) if os.path.isdir(args.work_dir) else "no such directory"
        if problem:
            raise MiningError(f"--work-dir '{args.work_dir}' cannot hold the vectors ({problem})")
    # every output checked now, not after the embedding: none may be an input or another output
    base = os.path.splitext(os.path.abspath(args.out))[0]
    report_option = "--report" if args.report else "--report (default: OUT with .json)"
    plot_option = "--plot" if args.plot else "--plot (default: OUT with .png)"
    out, report_path, png_path = check_outputs(
        {"--out": args.out, report_option: args.report or base + ".json", plot_option: args.plot or base + ".png"},
        {"--train": args.train, "--corpus": args.corpus, "--checkpoint": args.checkpoint,
         "--sentencepiece-model": args.sentencepiece_model}).values()
    try:
        rows = read_split(args.train, args.format, args, use_hard=False)
    except PrepareError as e:
        raise MiningError(str(e)) from None
    pairs = [(a, p) for a, p, _ in assemble(rows, hard_negatives=False)]
    if not pairs:
        raise MiningError(f"--train {' '.join(args.train)}: no positive pairs (skipped: {dict(rows.skipped)})")
    corpus = None
    if args.corpus:
        if not os.path.isfile(args.corpus):
            raise MiningError(f"--corpus '{args.corpus}' does not exist")
        try:
            with open(args.corpus, encoding="utf-8") as f:
                corpus = [" ".join(line.split()) for line in f]
        except UnicodeDecodeError as e:
            raise NotUtf8Error(args.corpus, e) from None
        corpus = [t for t in corpus if t]
    hub = load_hub(args)

    def encode(texts):
        return hub.embed(texts, pooling=args.pooling, head=args.head, batch_size=args.batch_size,
                         show_progress=False)

    result = mine(pairs, encode, rules, corpus, args.chunk_size, args.work_dir, args.backend)
    with disk_full_reported(out, "--out"):
        write_rows(result, out)
    report = summary(result, rules, {
        "train": [os.path.abspath(t) for t in args.train], "pairs_read": rows.read,
        "pairs_skipped": dict(rows.skipped), "checkpoint": os.path.abspath(args.checkpoint),
        "corpus_file": os.path.abspath(args.corpus) if args.corpus else None, "out": out})
    with disk_full_reported(report_path, report_option):
        write_json(report_path, report)
    with disk_full_reported(png_path, plot_option):
        png = plot(result, png_path)
    c = result.counts
    print(f"wrote {out}: {c['rows_written']} rows for {c['pairs']} pairs ({c['duplicate_pairs']} repeated pairs "
          f"written once; {c['anchors']} anchors, corpus of {c['corpus']}); {c['pairs_without_negative']} pairs "
          f"without a negative, {c['pairs_with_fewer_negatives']} with fewer than {rules.num_negatives}")
    for key, value in c.items():
        if key.startswith("removed_"):
            print(f"  candidates removed by {key[8:]}: {value}")
    print(f"report {report_path}" + (f", plot {png}" if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
