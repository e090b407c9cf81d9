"""``clear-eval-sts``: the paper's Table 2 (SentEval STS, no fine-tuning) for a checkpoint.

    clear-eval-sts --checkpoint checkpoints/checkpoint_best.pt --data data-bin \\
        --sts-dir SentEval/data/downstream/STS --output sts.json

Spearman's rho x100 between the cosine similarity of the two sentences'
vectors and the gold score, for SICK-R (test), STS-B (test) and STS12-16, and
their average, for [CLS] and mean pooling. STS12-16 use SentEval's "all"
aggregation as SimCSE reports it (one correlation over all pairs of a year).
Also prints alignment and uniformity (Wang & Isola 2020) on STS-B as
diagnostics, as SimCSE does. ``--protocol senteval`` gives the original
SentEval's numbers instead (CLEAR's Table 2 protocol): STS12-16 as the mean of
their subsets, STS-B and SICK-R through SentEval's supervised regressor.
"""

import argparse
import logging
import math
import os
import sys


from .eval_common import check_json_output, jsonable, pooling_label, row_names, write_json
from .hub_args import add_checkpoint_args, add_embedding_args, fail, load_hub, setup_logging
from . import command

logger = logging.getLogger("clear-eval-sts")

AGGREGATION_NOTE = (
    'STS12-STS16: SentEval "all" aggregation, as SimCSE reports it: one Spearman over the '
    "pairs of all of a year's subsets pooled together (not the mean of the subsets). "
    "STS-B and SICK-R: {split} split."
)

SENTEVAL_NOTE = (
    "Protocol senteval (the original SentEval, as CLEAR's Table 2): STS12-STS16: {average} of the "
    "subsets' Spearman of cosine similarity; STS-B and SICK-R: Spearman of SentEval's regressor "
    "(softmax over 1..5 on [|u-v|, u*v], trained on train, selected on dev, seed 1111) on test."
)


def get_parser():
    from ..preprocessing.sts_readers import ALL_TASKS

    parser = argparse.ArgumentParser(
        prog="clear-eval-sts",
        description="SentEval STS (the CLEAR paper's Table 2): Spearman x100 for SICK-R, STS-B, "
        "STS12-16 and their average, for [CLS] and mean pooling; printed as a table and "
        "written as JSON.",
    )
    add_checkpoint_args(parser, required=False)
    parser.add_argument(
        "--model", action="append", metavar="DIR",
        help="also score this encoder in the same table: a sentence-transformers directory "
        "(its own pooling) or a Hugging Face model directory (mean pooling); repeatable",
    )
    add_embedding_args(parser, "sentence poolings to evaluate (default: cls,mean)", multiple_poolings=True)
    data = parser.add_argument_group("STS data")
    data.add_argument(
        "--sts-dir", required=True, metavar="DIR",
        help="SentEval's STS data: a directory holding STS12-en-test ... STS16-en-test, "
        "STSBenchmark and SICK (SentEval's data/downstream/STS plus SICK); a "
        "'senteval_tokenized_lowercased' subdirectory, if present, holds the SentEval copy",
    )
    data.add_argument(
        "--sts-copy", choices=("senteval", "raw"), default="senteval",
        help="senteval: the Moses-tokenized, lowercased files of SentEval's download "
        "script, on which SentEval/SimCSE-style numbers (and the paper's Table 2) are "
        "measured; raw: the original cased, untokenized files (default: senteval)",
    )
    data.add_argument(
        "--tasks", default=",".join(ALL_TASKS),
        help=f"comma-separated tasks (default: all of {', '.join(ALL_TASKS)})",
    )
    data.add_argument(
        "--split", choices=("test", "dev"), default="test",
        help="STS-B and SICK-R split to score (default: test, as Table 2)",
    )
    data.add_argument(
        "--protocol", choices=("simcse", "senteval"), default="simcse",
        help="simcse: every task zero-shot, Spearman of cosine similarities, STS12-16 pooled "
        "(SimCSE's and sentence-transformers' numbers); senteval: the original SentEval's, as "
        "in CLEAR's Table 2: STS12-16 as the mean/wmean of their subsets, STS-B and SICK-R by "
        "SentEval's regressor trained on the frozen vectors (train, dev for selection, test; "
        "seed 1111); the JSON then holds both tables (default: simcse)",
    )
    data.add_argument(
        "--senteval-average", choices=("wmean", "mean"), default="wmean",
        help="--protocol senteval: STS12-16 as the size-weighted (wmean, SentEval's first "
        "'ALL' line) or plain mean of the subsets' Spearman; the JSON holds both (default: wmean)",
    )
    data.add_argument(
        "--align-uniform-split", choices=("dev", "test", "none"), default="dev",
        help="STS-B split for alignment (pairs scored > 4) and uniformity (all sentences); "
        "SimCSE uses dev (default: dev; none: skip)",
    )
    data.add_argument(
        "--skip-malformed", action="store_true",
        help="leave out malformed lines (each is logged with its file and line) instead of stopping",
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--output", metavar="FILE",
        help="JSON results (default: the checkpoint's path with .sts.json instead of .pt)",
    )
    out.add_argument("--name", help="row label in the table (default: the checkpoint file name)")
    parser.add_argument(
        "--truncate-dims", default="trained", metavar="LIST",
        help="also score the checkpoint's vectors truncated to these sizes, one row each (pooling@size): "
        "'trained' = the sizes of its --matryoshka-dims training (none for other models), 'none', or a "
        "comma-separated list (default: trained)",
    )
    return parser


def evaluate(hub, args):
    """Results dict (see the JSON) for the options in ``args``: the checkpoint, then each --model."""
    from ..evaluation.sts.scoring import as_encoder, hub_encoder, load_sts, score

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    poolings = [p.strip() for p in args.poolings.split(",") if p.strip()]
    pair_sets, dirs = load_sts(args.sts_dir, tasks, args.sts_copy, args.split, args.align_uniform_split,
                               args.skip_malformed, args.protocol)
    scoring = dict(protocol=args.protocol, senteval_average=args.senteval_average)
    models, truncated = {}, 0
    names = iter(row_names(args))
    if hub is not None:
        sizes = truncate_sizes(args.truncate_dims, hub, args.head)
        encoder = hub_encoder(hub, poolings, args.head, args.batch_size, show_progress=sys.stderr.isatty(),
                              truncate_dims=sizes)
        logger.info("embedding with %s (%s pooling)", args.checkpoint, ", ".join(poolings))
        models[next(names)] = score(encoder, pair_sets, args.align_uniform_split, **scoring)
        truncated = encoder.truncated
    for path in args.model or []:
        logger.info("embedding with %s", path)
        models[next(names)] = score(as_encoder(path, batch_size=args.batch_size), pair_sets, args.align_uniform_split,
                             name=f"--model '{path}'", **scoring)
    first = next(iter(models.values()))
    return {
        "checkpoint": os.path.abspath(args.checkpoint) if args.checkpoint else None,
        "models": models,
        "sts_dir": os.path.abspath(args.sts_dir),
        "sts_copy": args.sts_copy,
        "task_dirs": {t: os.path.abspath(dirs[t]) for t in tasks},
        "split": args.split,
        "protocol": args.protocol,
        "aggregation": "all" if args.protocol == "simcse" else args.senteval_average,
        "aggregation_note": (AGGREGATION_NOTE.format(split=args.split) if args.protocol == "simcse"
                             else SENTEVAL_NOTE.format(average=args.senteval_average)),
        "metric": ("spearman x100 of cosine similarity" if args.protocol == "simcse" else
                   "spearman x100: of cosine similarity (STS12-16), of SentEval's regressor (STS-B, SICK-R)"),
        "head": args.head,
        "sentences_truncated": truncated,
        "malformed_lines_skipped": sum(len(p.skipped) for p in pair_sets.values()),
        "results": first,
    }


def truncate_sizes(text, hub, head):
    """The sizes of --truncate-dims below the vectors' full size (the full one is the plain row)."""
    from ..models.hub_interface import check_truncate_dim

    full = hub.model.representation_dim(head)
    if text in ("none", ""):
        return []
    if text == "trained":
        sizes = hub.matryoshka_dims
    else:
        try:
            sizes = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            fail(f"--truncate-dims must be 'trained', 'none' or comma-separated sizes, got {text!r}")
        for d in sizes:
            try:
                check_truncate_dim(d, full)
            except ValueError as e:
                fail(f"--truncate-dims: {e}")
    return sorted({d for d in sizes if d < full}, reverse=True)


def _invalid(x) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def _fmt(x, spec="5.1f"):
    return "n/a".rjust(len(format(0.0, spec))) if _invalid(x) else format(x, spec)


def format_table(report, name) -> str:
    from ..preprocessing.sts_readers import TABLE2_TASKS

    first = next(iter(report["results"].values()))["table"]
    columns = [t for t in TABLE2_TASKS if t in first] + ["Avg"]
    label_width = max(len(name) + 8, 16)
    copy = 'SentEval tokenized+lowercased' if report['sts_copy'] == 'senteval' else 'raw'
    lines = [
        f"SentEval STS, protocol {report['protocol']}: Spearman's rho x 100 "
        + ("between the cosine similarity of the two sentence vectors and the gold score"
           if report["protocol"] == "simcse" else "with the gold score") + f"; {copy} copy",
        report["aggregation_note"],
        "",
        "Method".ljust(label_width) + "".join(c.rjust(8) for c in columns),
    ]
    rows = [(f"{model}-{pooling_label(pooling)}", res)
            for model, results in report["models"].items() for pooling, res in results.items()]
    label_width = max([label_width] + [len(label) + 2 for label, _ in rows])
    lines[3] = "Method".ljust(label_width) + "".join(c.rjust(8) for c in columns)
    for label, res in rows:
        lines.append(label.ljust(label_width) + "".join(_fmt(res["table"].get(c)).rjust(8) for c in columns))
    if any(_invalid(res["table"].get(c)) for _, res in rows for c in columns):
        lines.append("n/a: no valid score (every similarity, or every gold score, equal: Spearman is undefined); "
                     "null in the JSON, and the average is n/a too")
    diag = [(p, r["alignment_uniformity"]) for p, r in report["results"].items() if r["alignment_uniformity"]]
    if diag:
        d0 = diag[0][1]
        lines += [
            "",
            f"Alignment and uniformity (Wang & Isola 2020) on STS-B {d0['split']}: alignment over "
            f"the {d0['positive_pairs']} pairs scored > 4, uniformity over all {d0['sentences']} "
            "sentences; lower is better for both.",
        ]
        for pooling, d in diag:
            lines.append(
                f"  {pooling_label(pooling):6s} alignment {_fmt(d['alignment'], '.4f')}   "
                f"uniformity {_fmt(d['uniformity'], '.4f')}"
            )
    return "\n".join(lines)


def check_args(args):
    """Refuse bad options right after parsing, before any model is loaded; returns the output path."""
    from ..preprocessing.sts_readers import ALL_TASKS
    from ..models.pooling import POOLING_CHOICES

    if not args.checkpoint and not args.model:
        fail("give --checkpoint and/or --model (a sentence-transformers or Hugging Face directory)")
    if not args.checkpoint and not args.output:
        fail("--output is required without --checkpoint")
    if args.batch_size < 1:
        fail(f"--batch-size must be >= 1, got {args.batch_size}")
    for option, value, known, noun in (("--poolings", args.poolings, POOLING_CHOICES, "pooling(s)"),
                                       ("--tasks", args.tasks, ALL_TASKS, "task(s)")):
        names = [n.strip() for n in value.split(",") if n.strip()]
        if not names:
            fail(f"{option} is empty; give one or more of {', '.join(known)}, comma-separated")
        unknown = [n for n in names if n not in known]
        if unknown:
            fail(f"{option}: unknown {noun} {', '.join(unknown)}; known: {', '.join(known)}")
    if args.output:
        option, output = "--output", args.output
    elif os.path.isfile(args.checkpoint):  # a missing checkpoint is load_hub's error to report
        option = "--output (default: beside --checkpoint)"
        output = os.path.splitext(os.path.abspath(args.checkpoint))[0] + ".sts.json"
    else:
        return None
    return check_json_output(output, option, args.checkpoint)


@command
def main(argv=None):
    setup_logging()
    args = get_parser().parse_args(argv)
    from ..preprocessing.sts_readers import STSFormatError

    output = check_args(args)
    hub = load_hub(args) if args.checkpoint else None
    if output is None:  # the checkpoint loaded after all (load_hub exits when it cannot)
        output = check_json_output(os.path.splitext(os.path.abspath(args.checkpoint))[0] + ".sts.json",
                                   "--output (default: beside --checkpoint)", args.checkpoint)
    try:
        report = evaluate(hub, args)
    except (STSFormatError, FileNotFoundError, ValueError) as e:
        fail(e)
    print(format_table(report, row_names(args)[0]))  # the first row: --checkpoint's, else the first --model's
    write_json(output, jsonable(report))
    print(f"\nwritten {output}")


if __name__ == "__main__":
    main()
