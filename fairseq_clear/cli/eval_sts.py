"""``clear-eval-sts``: the paper's Table 2 (SentEval STS, no fine-tuning) for a checkpoint.

    clear-eval-sts --checkpoint checkpoints/checkpoint_best.pt --data data-bin \\
        --sts-dir SentEval/data/downstream/STS --output sts.json

Spearman's rho x100 between the cosine similarity of the two sentences'
vectors and the gold score, for SICK-R (test), STS-B (test) and STS12-16, and
their average, for [CLS] and mean pooling. STS12-16 use SentEval's "all"
aggregation as SimCSE reports it (one correlation over all pairs of a year).
Also prints alignment and uniformity (Wang & Isola 2020) on STS-B as
diagnostics, as SimCSE does.
"""

import argparse
import json
import logging
import math
import os
import sys
import time

import numpy as np

from .hub_args import add_checkpoint_args, add_embedding_args, load_hub, setup_logging

logger = logging.getLogger("clear-eval-sts")

POOLING_LABELS = {"cls": "[CLS]", "mean": "mean"}
AGGREGATION_NOTE = (
    'STS12-STS16: SentEval "all" aggregation, as SimCSE reports it: one Spearman over the '
    "pairs of all of a year's subsets pooled together (not the mean of the subsets). "
    "STS-B and SICK-R: {split} split."
)


def get_parser():
    from ..evaluation.sts import ALL_TASKS

    parser = argparse.ArgumentParser(
        prog="clear-eval-sts",
        description="SentEval STS (the CLEAR paper's Table 2): Spearman x100 for SICK-R, STS-B, "
        "STS12-16 and their average, for [CLS] and mean pooling; printed as a table and "
        "written as JSON.",
    )
    add_checkpoint_args(parser)
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
    return parser


def evaluate(hub, args):
    """Results dict (see the JSON) for the options in ``args``."""
    from ..models.inference import cosine_rows, embed_tokens
    from ..evaluation.sts import (
        ALL_TASKS, SENTEVAL_COPY_DIR, TABLE2_TASKS, alignment_uniformity, load_task,
        resolve_sts_dirs, score_pairs, unique_sentences,
    )
    import torch

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in ALL_TASKS]
    if unknown:
        raise ValueError(f"--tasks: unknown task(s) {unknown}, choose from {ALL_TASKS}")
    poolings = [p.strip() for p in args.poolings.split(",") if p.strip()]
    dirs = resolve_sts_dirs(args.sts_dir, args.sts_copy)
    if args.sts_copy == "senteval" and not os.path.isdir(os.path.join(args.sts_dir, SENTEVAL_COPY_DIR)):
        logger.info("--sts-copy senteval: no %s/ in %s, so its files are taken as SentEval's copy",
                    SENTEVAL_COPY_DIR, args.sts_dir)
    pair_sets = {t: load_task(t, dirs[t], args.skip_malformed, args.split) for t in tasks}
    if args.align_uniform_split != "none":
        pair_sets["_align"] = load_task("STS-B", dirs["STS-B"], args.skip_malformed, args.align_uniform_split)
    for name, pairs in pair_sets.items():
        logger.info("%s: %d pairs from %s", name.strip("_"), len(pairs), dirs["STS-B" if name == "_align" else name])

    sentences, rows = unique_sentences(list(pair_sets.values()))
    logger.info("embedding %d distinct sentences (%s pooling)", len(sentences), ", ".join(poolings))
    start = time.time()
    tokens, truncated = hub.tokenizer.encode_counted(sentences, max_positions=hub.model.max_positions())
    if truncated:
        logger.warning("truncated %d sentences longer than %d positions", truncated, hub.model.max_positions())
    vectors = embed_tokens(
        hub.model, tokens, poolings, head=args.head, batch_size=args.batch_size,
        show_progress=sys.stderr.isatty(),
    )
    logger.info("embedded in %.1f s", time.time() - start)

    results = {}
    for pooling in poolings:
        v = vectors[pooling]
        per_task = {}
        for (name, pairs), (r1, r2) in zip(pair_sets.items(), rows):
            a, b = v[torch.from_numpy(r1)], v[torch.from_numpy(r2)]
            if name == "_align":
                per_task["_align"] = {
                    "split": args.align_uniform_split,
                    **alignment_uniformity(a.numpy(), b.numpy(), pairs.scores),
                }
                continue
            per_task[name] = score_pairs(pairs, cosine_rows(a, b))
        table = {t: per_task[t]["spearman"] for t in TABLE2_TASKS if t in per_task}
        avg = float(np.mean(list(table.values()))) if table else float("nan")
        results[pooling] = {
            "table": {**table, "Avg": avg},
            "tasks": {k: v for k, v in per_task.items() if k != "_align"},
            "alignment_uniformity": per_task.get("_align"),
        }
    return {
        "checkpoint": os.path.abspath(args.checkpoint),
        "sts_dir": os.path.abspath(args.sts_dir),
        "sts_copy": args.sts_copy,
        "task_dirs": {t: os.path.abspath(dirs[t]) for t in tasks},
        "split": args.split,
        "aggregation": "all",
        "aggregation_note": AGGREGATION_NOTE.format(split=args.split),
        "metric": "spearman x100 of cosine similarity",
        "head": args.head,
        "sentences_truncated": truncated,
        "malformed_lines_skipped": sum(len(p.skipped) for p in pair_sets.values()),
        "results": results,
    }


def _jsonable(x):
    # NaN (a constant similarity) is not JSON: write null
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def _fmt(x):
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:5.1f}"


def format_table(report, name) -> str:
    from ..evaluation.sts import TABLE2_TASKS

    first = next(iter(report["results"].values()))["table"]
    columns = [t for t in TABLE2_TASKS if t in first] + ["Avg"]
    label_width = max(len(name) + 8, 16)
    lines = [
        "SentEval STS: Spearman's rho x 100 between the cosine similarity of the two sentence "
        f"vectors and the gold score; {'SentEval tokenized+lowercased' if report['sts_copy'] == 'senteval' else 'raw'} copy",
        report["aggregation_note"],
        "",
        "Method".ljust(label_width) + "".join(c.rjust(8) for c in columns),
    ]
    for pooling, res in report["results"].items():
        label = f"{name}-{POOLING_LABELS.get(pooling, pooling)}"
        lines.append(label.ljust(label_width) + "".join(_fmt(res["table"].get(c)).rjust(8) for c in columns))
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
                f"  {POOLING_LABELS.get(pooling, pooling):6s} alignment {d['alignment']:.4f}   "
                f"uniformity {d['uniformity']:.4f}"
            )
    return "\n".join(lines)


def main(argv=None):
    setup_logging()
    args = get_parser().parse_args(argv)
    from ..evaluation.sts import STSFormatError

    hub = load_hub(args)
    try:
        report = evaluate(hub, args)
    except (STSFormatError, FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
    name = args.name or os.path.splitext(os.path.basename(args.checkpoint))[0]
    print(format_table(report, name))
    output = args.output or os.path.splitext(os.path.abspath(args.checkpoint))[0] + ".sts.json"
    with open(output, "w", encoding="utf-8") as f:
        json.dump(_jsonable(report), f, indent=2, allow_nan=False)
        f.write("\n")
    print(f"\nwritten {output}")


if __name__ == "__main__":
    main()
