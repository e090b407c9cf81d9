"""``clear-eval-senteval``: SentEval's transfer and probing tasks (DeCLUTR's Table 1) for any encoder.

    clear-eval-senteval --checkpoint checkpoints/checkpoint_best.pt --data data-bin \\
        --senteval-data SentEval/data --tasks downstream,probing --output senteval.json

A classifier (SentEval's logistic regression, or its MLP with ``--nhid``) is trained on the
frozen sentence vectors of each task, as SentEval's own code does it
(fairseq_clear/evaluation/senteval/classifier.py); SICK-R and STS-B through SentEval's
regressor. Prints DeCLUTR's score per task (test accuracy x100; MRPC: mean of accuracy and F1;
SICK-R, STS-B, STS12-16: Spearman x100), its downstream and probing averages and their mean
(each labelled with the DeCLUTR tasks it lacks, when it lacks some), and writes them as JSON
with the time per task. The encoders are loaded as in clear-eval-sts (a checkpoint, and/or
--model directories).
"""

import argparse
import hashlib
import json
import logging
import math
import os
import sys

from . import command
from .eval_common import POOLING_LABELS, check_json_output, jsonable, row_names, write_json
from .hub_args import add_checkpoint_args, add_embedding_args, fail, load_hub, setup_logging

logger = logging.getLogger("clear-eval-senteval")


def get_parser():
    from ..evaluation.senteval.classifier import CONFIGS
    from ..evaluation.senteval.data import GROUPS, TASKS

    parser = argparse.ArgumentParser(
        prog="clear-eval-senteval",
        description="SentEval's transfer (downstream) and probing tasks, as in DeCLUTR's Table 1: a classifier "
        "trained on frozen sentence vectors per task, SentEval's protocol; printed as a table and written as JSON.",
    )
    add_checkpoint_args(parser, required=False)
    parser.add_argument(
        "--model", action="append", metavar="DIR",
        help="also score this encoder: a sentence-transformers directory (its own pooling) or a Hugging Face "
        "model directory (mean pooling); repeatable",
    )
    add_embedding_args(parser, "sentence poolings of --checkpoint to evaluate (default: mean, DeCLUTR's)",
                       multiple_poolings=True)
    parser.set_defaults(poolings="mean")
    data = parser.add_argument_group("data (each task is read from the first of these that has it)")
    data.add_argument(
        "--senteval-data", metavar="DIR",
        help="SentEval's data folder: downstream/{MR,CR,SUBJ,MPQA,SST/binary,SST/fine,TREC,MRPC,SICK,SNLI,"
        "STS/STSBenchmark,STS/STS12-en-test..STS16-en-test} as its data/downstream/get_transfer_data.bash "
        "writes them, and probing/*.txt",
    )
    data.add_argument(
        "--glue-data", metavar="DIR",
        help="GLUE's glue_data folder: SST2 from SST-2 (its training phrases less 872 held out as dev; GLUE's dev "
        "as test: not SentEval's split) and MRPC from MRPC/msr_paraphrase_{train,test}.txt (SentEval's files)",
    )
    data.add_argument(
        "--sts-dir", metavar="DIR",
        help="an STS folder as clear-eval-sts takes it: SICK/ (for SICK-E and SICK-R), STSBenchmark/ and "
        "STS12-en-test/ .. STS16-en-test/ (SentEval's tokenized copy when it has one)",
    )
    data.add_argument(
        "--tasks", default="all",
        help=f"comma-separated tasks and groups ({', '.join(GROUPS)}: DeCLUTR's, less ImageCaptionRetrieval, "
        "not implemented); tasks: "
        f"{', '.join(TASKS)} (SentEval's names work too). Default: all, i.e. every task whose data is found",
    )
    data.add_argument(
        "--max-examples", type=int, metavar="N",
        help="at most N examples per split, drawn at random (seed 1111): a quick smoke run, not comparable",
    )
    clf = parser.add_argument_group("classifier (SentEval's)")
    clf.add_argument(
        "--config", choices=tuple(CONFIGS), default="paper",
        help="paper: SentEval's default config, comparable to the literature (10 folds, Adam, batches of 64, "
        "tenacity 5, epoch size 4); prototyping: its fast one (5 folds, RMSprop, batches of 128, tenacity 3, "
        "epoch size 2) (default: paper)",
    )
    clf.add_argument("--nhid", type=int, help="hidden units: 0 logistic regression (the configs'), > 0 SentEval's "
                     "MLP (Sigmoid); WC always uses logistic regression, as in SentEval")
    clf.add_argument("--dropout", type=float, help="MLP dropout (default 0)")
    clf.add_argument("--optim", help="optimizer as SentEval writes it: adam, rmsprop, 'sgd,lr=0.1', ...")
    clf.add_argument("--classifier-batch-size", type=int, dest="classifier_batch_size",
                     help="classifier batch size (default: the config's)")
    clf.add_argument("--tenacity", type=int, help="rounds without a better dev score before stopping")
    clf.add_argument("--epoch-size", type=int, dest="epoch_size", help="passes over the train set per round")
    clf.add_argument("--max-epoch", type=int, dest="max_epoch", help="most passes (default 200)")
    clf.add_argument("--kfold", type=int, help="folds for MR, CR, SUBJ, MPQA, TREC, MRPC")
    clf.add_argument("--seed", type=int, default=1111, help="SentEval's seed (default: 1111)")
    out = parser.add_argument_group("output")
    out.add_argument("--output", metavar="FILE",
                     help="JSON results (default: the checkpoint's path with .senteval.json instead of .pt)")
    out.add_argument("--name", help="row label (default: the checkpoint file name)")
    out.add_argument("--cache-dir", metavar="DIR",
                     help="sentence vectors per (model, task), reused by a later run with the same model content, "
                     "tokenizer, head, poolings and data; each entry checked by its SHA-256 (a damaged one is "
                     "embedded again) (default: the output's path with .vectors instead of .json)")
    out.add_argument("--cache-max-gb", type=float, default=20.0, metavar="GB",
                     help="the cache's size bound in GB (10^9 bytes): the least recently used entries are removed "
                     "beyond it, never a file the cache did not write; 0 removes every entry and keeps none "
                     "(default: 20; full SentEval is about 6 GB per pooling at 768 dimensions)")
    out.add_argument("--no-cache", action="store_true", help="embed again and keep no vectors")
    return parser


def check_args(args):
    """Refuse bad options before any model is loaded; returns (classifier config, tasks, output path)."""
    from ..errors import FairseqClearError
    from ..evaluation.senteval.classifier import make_config
    from ..evaluation.senteval.data import resolve_tasks
    from ..models.pooling import POOLING_CHOICES

    if not args.checkpoint and not args.model:
        fail("give --checkpoint and/or --model (a sentence-transformers or Hugging Face directory)")
    if not args.checkpoint and not args.output:
        fail("--output is required without --checkpoint")
    if not (args.senteval_data or args.glue_data or args.sts_dir):
        fail("give --senteval-data (SentEval's data folder), and/or --glue-data, --sts-dir")
    for path in args.model or []:
        if not os.path.isdir(path):
            fail(f"--model '{path}' is not a directory (a sentence-transformers or Hugging Face model)")
    if not (math.isfinite(args.cache_max_gb) and args.cache_max_gb >= 0):
        fail(f"--cache-max-gb must be a size in GB >= 0, got {args.cache_max_gb}")
    if args.cache_dir and os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        fail(f"--cache-dir '{args.cache_dir}' exists and is not a directory")
    for option, value in (("--senteval-data", args.senteval_data), ("--glue-data", args.glue_data),
                          ("--sts-dir", args.sts_dir)):
        if value and not os.path.isdir(value):
            fail(f"{option} '{value}' is not a directory")
    for attr in ("senteval_data", "glue_data", "sts_dir"):  # the JSON names where each task came from
        if getattr(args, attr):
            setattr(args, attr, os.path.abspath(getattr(args, attr)))
    if args.batch_size < 1:
        fail(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.max_examples is not None and args.max_examples < 10:
        fail(f"--max-examples must be >= 10, got {args.max_examples}")
    poolings = [p.strip() for p in args.poolings.split(",") if p.strip()]
    unknown = [p for p in poolings if p not in POOLING_CHOICES]
    if not poolings or unknown:
        fail(f"--poolings: give one or more of {', '.join(POOLING_CHOICES)}, comma-separated")
    try:
        cfg = make_config(args.config, nhid=args.nhid, dropout=args.dropout, optim=args.optim,
                          batch_size=args.classifier_batch_size, tenacity=args.tenacity, epoch_size=args.epoch_size,
                          max_epoch=args.max_epoch, kfold=args.kfold, seed=args.seed)
        tasks = resolve_tasks(args.tasks)
    except FairseqClearError as e:
        fail(str(e).replace("--batch-size", "--classifier-batch-size"))
    if args.output:
        output = check_json_output(args.output, "--output", args.checkpoint)
    elif os.path.isfile(args.checkpoint):
        output = check_json_output(os.path.splitext(os.path.abspath(args.checkpoint))[0] + ".senteval.json",
                                   "--output (default: beside --checkpoint)", args.checkpoint)
    else:
        output = None  # a missing checkpoint is load_hub's error
    return cfg, tasks, output


def load_tasks(args, names):
    """{task: TaskData} for the chosen tasks; with --tasks all (the default), those whose data is found."""
    from ..evaluation.senteval.data import find_task, load_task, subsample

    explicit = args.tasks.strip().lower() != "all"
    out = {}
    for name in names:
        if not explicit and find_task(name, args.senteval_data, args.glue_data, args.sts_dir) is None:
            continue
        data = load_task(name, args.senteval_data, args.glue_data, args.sts_dir)
        if args.max_examples:
            data = subsample(data, args.max_examples, args.seed)
        out[name] = data
        logger.info("%s: %s from %s%s", name, ", ".join(f"{k} {v}" for k, v in data.sizes().items()), data.source,
                    f" ({data.note})" if data.note else "")
    if not out:
        fail("no task's data was found in the folders given (--senteval-data, --glue-data, --sts-dir)")
    skipped = [n for n in names if n not in out]
    if skipped:
        logger.info("no data for %s: left out", ", ".join(skipped))
    return out


def fingerprint(path: str, extra: str = "") -> str:
    """Identifies a model file, or every file of a model directory, by content (SHA-256, streamed
    once per run: a few seconds per GB, against the minutes its vectors take), for the vector cache.
    Path, size and time would not do: a checkpoint rewritten in place keeps them all."""
    from ..vocabulary import sha256

    h = hashlib.sha256(extra.encode())
    path = os.path.abspath(path)
    files = [path] if os.path.isfile(path) else sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)
    for f in files:
        if os.path.isfile(f):  # not a dangling link
            h.update(f"{os.path.relpath(f, path)}\0{sha256(f)}\n".encode())
    return h.hexdigest()


def checkpoint_fingerprint(args, hub) -> str:
    """What the checkpoint's vectors depend on, besides the poolings (the cache's labels): its
    weights, the tokenizer (its files' SHA-256 and options) and dictionary (token -> id), the head
    and the truncation length, how a sentence is read (prompt, lower-casing, length) and pooled (prompt
    positions, Dense layers) as the loaded model does it. Batch size and device change them only by
    rounding: not in it."""
    from ..models.inference import vector_settings

    tokens = hub.tokenizer
    extra = json.dumps({"tokenizer": tokens.tokenizer.record(), "head": args.head,
                        "sentence": vector_settings(tokens, hub.model),
                        "dictionary": hashlib.sha256(tokens.lookup.tobytes()).hexdigest(),
                        "bos_eos": [int(tokens.bos), int(tokens.eos)],
                        "max_positions": int(hub.model.max_positions())}, sort_keys=True, default=str)
    return fingerprint(args.checkpoint, extra)


def build_encoders(args, hub):
    """({model: encoder}, {model: cache fingerprint}, {model: its labels, where we choose them})."""
    from ..evaluation.sts.scoring import as_encoder, hub_encoder

    poolings = [p.strip() for p in args.poolings.split(",") if p.strip()]
    encoders, prints, labels = {}, {}, {}
    names = iter(row_names(args))  # clear-eval-sts's: unique, none dropped
    if hub is not None:
        name = next(names)
        encoders[name] = hub_encoder(hub, poolings, args.head, args.batch_size, show_progress=sys.stderr.isatty())
        labels[name] = poolings
        if not args.no_cache:
            prints[name] = checkpoint_fingerprint(args, hub)
    for path in args.model or []:
        name = next(names)
        encoders[name] = as_encoder(path, batch_size=args.batch_size)
        if not args.no_cache:
            prints[name] = fingerprint(path)
    return encoders, prints, labels


def _fmt(x):
    return "n/a" if x is None else f"{x:.2f}"


def _average_label(group: str, covered: dict) -> str:
    """'Downstream', or 'Downstream (16 of 18)' for a mean over fewer tasks than DeCLUTR's."""
    return group if covered["complete"] else f"{group} ({len(covered['tasks'])} of {covered['of']})"


def format_table(report) -> str:
    from ..evaluation.senteval.data import DOWNSTREAM, PROBING

    rows = [(f"{model}-{POOLING_LABELS.get(label, label)}", res)
            for model, labels in report["models"].items() for label, res in labels.items()]
    tasks = report["tasks"]
    width = max([12] + [len(t) + 2 for t in tasks])
    col = max([10] + [len(label) + 2 for label, _ in rows])
    cfg = report["classifier"]
    lines = [
        f"SentEval transfer and probing tasks (DeCLUTR's Table 1); config {report['config']}: "
        f"{'logistic regression' if cfg['nhid'] == 0 else 'MLP nhid ' + str(cfg['nhid'])}, {cfg['optim']}, "
        f"batch {cfg['batch_size']}, tenacity {cfg['tenacity']}, epoch size {cfg['epoch_size']}, "
        f"{cfg['kfold']} folds, seed {cfg['seed']}",
        "DeCLUTR's scores: test accuracy x100 (MRPC: mean of accuracy and F1; SICK-R, STS-B: Spearman x100 of "
        "SentEval's regressor; STS12-16: mean over subsets of the cosine's Spearman x100); Downstream: the mean "
        "over DeCLUTR's 18 downstream tasks (SNLI and ImageCaptionRetrieval included), Probing: over its 10 probing "
        "tasks, Avg: their mean (its Table 1); a mean over fewer tasks reads 'k of n'.",
    ]
    if report.get("max_examples"):
        lines.append(f"At most {report['max_examples']} examples per split (--max-examples): not comparable.")
    for task, note in report["notes"].items():
        lines.append(f"{task}: {note}")
    averages = report["averages"]
    labels = {g: _average_label(g, averages[g]) for g in ("Downstream", "Probing")}
    width = max([width] + [len(label) + 2 for label in labels.values()])
    lines += ["", "Task".ljust(width) + "".join(label.rjust(col) for label, _ in rows) + "    time (s)"]
    for group, names in (("Downstream", DOWNSTREAM), ("Probing", PROBING)):
        run = [t for t in names if t in tasks]
        for t in run:
            times = [res["times"][t] for _, res in rows]
            spent = "cached" if all(x["cached"] for x in times) else f"{times[0]['embed_s']:.1f}"
            spent += " + " + " + ".join(f"{x['classify_s']:.1f}" for x in times)
            lines.append(t.ljust(width) + "".join(_fmt(res["table"].get(t)).rjust(col) for _, res in rows)
                         + "    " + spent)
        if run:
            lines.append(labels[group].ljust(width)
                         + "".join(_fmt(res["table"].get(group)).rjust(col) for _, res in rows))
            lines.append("")
    lines.append("Avg".ljust(width) + "".join(_fmt(res["table"].get("Avg")).rjust(col) for _, res in rows))
    lines += ["", "time: embedding (or 'cached') + classifier per row"]
    for group in ("Downstream", "Probing"):  # never a partial mean passed off as DeCLUTR's
        covered = averages[group]
        if covered["tasks"] and not covered["complete"]:
            lines.append(f"{labels[group]}: the mean over {len(covered['tasks'])} of DeCLUTR's {covered['of']} "
                         f"{group.lower()} tasks, not DeCLUTR's {group}; missing: "
                         + ", ".join(f"{t} ({why})" for t, why in covered["missing"].items()))
    if not averages["Avg"]["complete"]:
        lines.append("Avg: the mean of the averages above, not DeCLUTR's Avg (it lacks some of its tasks)")
    heads = [labels["Downstream"], labels["Probing"], "Avg"]
    widths = [max(len(h) + 2, 8) for h in heads]
    lines += ["", "Model".ljust(col + 10) + "".join(h.rjust(w) for h, w in zip(heads, widths))]
    for label, res in rows:
        t = res["table"]
        lines.append(label.ljust(col + 10) + "".join(_fmt(t.get(k)).rjust(w)
                                                     for k, w in zip(("Downstream", "Probing", "Avg"), widths)))
    return "\n".join(lines)


@command
def main(argv=None):
    setup_logging()
    args = get_parser().parse_args(argv)
    from ..evaluation.senteval.data import TASKS
    from ..evaluation.senteval.transfer import VectorCache, coverage, evaluate_transfer

    cfg, names, output = check_args(args)
    tasks = load_tasks(args, names)
    hub = load_hub(args) if args.checkpoint else None
    if output is None:
        output = check_json_output(os.path.splitext(os.path.abspath(args.checkpoint))[0] + ".senteval.json",
                                   "--output (default: beside --checkpoint)", args.checkpoint)
    encoders, prints, labels = build_encoders(args, hub)
    cache = None
    if not args.no_cache:
        cache = VectorCache(os.path.abspath(args.cache_dir) if args.cache_dir else os.path.splitext(output)[0]
                            + ".vectors", max_bytes=int(args.cache_max_gb * 1e9))
        cache.prune()  # within the bound before this run adds to it (--cache-max-gb 0: empty)
    results = evaluate_transfer(encoders, tasks, cfg, cache=cache, fingerprints=prints,
                                progress=lambda m: logger.info("%s", m), labels=labels)
    # why each of DeCLUTR's tasks left out of the averages is missing
    reasons = {**{t: "not in --tasks" for t in TASKS if t not in names},
               **{t: "no data" for t in names if t not in tasks}}
    report = {
        "checkpoint": os.path.abspath(args.checkpoint) if args.checkpoint else None,
        "config": args.config,
        "classifier": cfg.as_dict(),
        "classifier_name": cfg.name,
        "tasks": list(tasks),
        "sources": {t: d.source for t, d in tasks.items()},
        "notes": {t: d.note for t, d in tasks.items() if d.note.startswith("GLUE")},
        "max_examples": args.max_examples,
        "metric": "DeCLUTR's: test accuracy x100; MRPC: mean of test accuracy and F1 x100; SICK-R and STS-B: test "
                  "Spearman x100 of SentEval's regressor; STS12-16: mean over the year's subsets of the cosine's "
                  "Spearman x100",
        "averages": coverage(list(tasks), reasons),
        "cache_dir": cache.directory if cache else None,
        "models": results,
    }
    print(format_table(report))
    write_json(output, jsonable(report))
    print(f"\nwritten {output}")


if __name__ == "__main__":
    main()
