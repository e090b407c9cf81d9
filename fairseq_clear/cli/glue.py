"""``clear-glue``: the GLUE steps of examples/glue (split, copy-tokenizer, settings, model-args, summarize).

    clear-glue split GLUE_DIR TASK TOKENIZER OUT       # or python -m fairseq_clear.cli.glue ...

The GLUE files are read by :mod:`fairseq_clear.preprocessing.glue_data`, the split, settings and
metrics live in :mod:`fairseq_clear.evaluation.glue.finetune` and model-args (the recipes' too) in
:mod:`fairseq_clear.continued`; this is their console script.
"""

import argparse
import os
import sys

from ..continued import ModelArgsError, model_args
from ..evaluation.glue.finetune import copy_tokenizer, publish, settings, split_task, summarize
from ..preprocessing.glue_data import TASKS, GlueDataError
from ..atomic_files import write_json
from ..preprocessing.common import check_outputs
from . import command


@command
def main(argv=None):
    parser = argparse.ArgumentParser(prog="clear-glue", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("split", help="GLUE tsv -> tokenized input0/input1/label text files")
    p.add_argument("glue_dir", help="GLUE data directory (glue_data/ with one folder per task)")
    p.add_argument("task", choices=list(TASKS), help="GLUE task")
    p.add_argument("tokenizer", help="the pre-training data's sentencepiece.model, or a data or model "
                   "directory holding dict.txt and its tokenizer (clear-import-hf's output, roberta.base)")
    p.add_argument("out_dir", metavar="OUT",
                   help="directory for SPLIT.input0, SPLIT.input1, SPLIT.label: new, empty, or an earlier output of "
                   "this command, whose files (listed in its export_manifest.json) a rerun replaces, leaving "
                   "everything else there untouched")
    p.add_argument("--bin", metavar="DIR", default="",
                   help="also write DIR/input0, DIR/input1 as fairseq-preprocess --only-source --srcdict --dict writes "
                   "them for those files, from the encoder's ids directly (examples/glue/prepare.sh)")
    p.add_argument("--dict", default="", help="dict.txt of --bin (the pre-training data's)")
    p = sub.add_parser("copy-tokenizer", help="copy a data or model directory's tokenizer files and record")
    p.add_argument("source", help="the directory (or a sentencepiece model)")
    p.add_argument("dest", help="the binarized GLUE task directory")
    p = sub.add_parser("publish", help="move a built TASK-bin into place (examples/glue/prepare.sh), replacing only "
                       "the files an earlier run wrote")
    p.add_argument("built", help="the complete folder built beside OUT")
    p.add_argument("out_dir", metavar="OUT", help="the TASK-bin folder: new, empty, or an earlier output of prepare.sh")
    p.add_argument("--check-only", action="store_true", help="only refuse an OUT that is not empty and not ours")
    p = sub.add_parser("settings", help="README.glue.md settings as shell variables")
    p.add_argument("task", choices=list(TASKS), help="GLUE task")
    p.add_argument("data_bin", help="the task's binarized data (prepare.sh output)")
    p.add_argument("--cpu", action="store_true", help="the CPU-sized variant (3 epochs unless --max-epoch)")
    p.add_argument("--batch-size", type=int, help="sentences per batch (default: README's)")
    p.add_argument("--max-epoch", type=int, help="epochs (default: 10, or 3 with --cpu)")
    p = sub.add_parser("model-args", help="--arch and size flags of a clear_roberta checkpoint")
    p.add_argument("checkpoint", help="the pre-trained checkpoint")
    p = sub.add_parser("summarize", help="GLUE dev metric from a fairseq-train JSON log")
    p.add_argument("log", help="fairseq-train output written with --log-format json")
    p.add_argument("task", choices=list(TASKS), help="GLUE task")
    p.add_argument("--json", metavar="FILE", help="also write the summary as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "split":
            if bool(args.bin) != bool(args.dict):
                raise GlueDataError("--bin and --dict go together: the dictionary the ids are written with")
            if args.dict and not os.path.isfile(args.dict):
                raise GlueDataError(f"--dict: '{args.dict}' does not exist")
            counts = split_task(args.glue_dir, args.task, args.tokenizer, args.out_dir, args.bin, args.dict)
            print(" ".join(f"{k}={v}" for k, v in counts.items()))
        elif args.command == "copy-tokenizer":
            copy_tokenizer(args.source, args.dest)
        elif args.command == "publish":
            publish(args.built, args.out_dir, args.check_only)
        elif args.command == "settings":
            for k, v in settings(args.task, args.data_bin, args.cpu, args.batch_size, args.max_epoch).items():
                print(f"{k}='{v}'")
        elif args.command == "model-args":
            print("\n".join(model_args(args.checkpoint)))  # one word per line: the recipes' mapfile
        elif args.command == "summarize":
            if args.json:
                check_outputs({"--json": args.json}, {"LOG": args.log})
            summary = summarize(args.log, args.task)
            metric, splits = summary["metric"], summary.get("dev_splits", [])
            fmt = lambda x: "n/a" if x is None else f"{x:.1f}"  # noqa: E731  (NaN/Inf: no score)
            for r in summary["validations"]:
                parts = "".join(f"  {s} {fmt(r[s])}" for s in splits)
                print(f"epoch {r['epoch']:3d}  update {r['num_updates']:7d}{parts}  {metric} {fmt(r[metric])}")
            best = summary["best"]
            detail = f" ({' / '.join(f'{s} {best[s]:.1f}' for s in splits)}, mean)" if splits else ""
            print(f"{args.task} dev {metric} (GLUE metric, best validation): {best[metric]:.1f}{detail} "
                  f"(epoch {best['epoch']}, update {best['num_updates']})")
            if args.json:
                write_json(args.json, summary)
    except (GlueDataError, ModelArgsError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
