#!/usr/bin/env python
"""Seed 004's Tables 1, 2, 6 and 7 in miniature: dev scores of the multi-task schedules from
all-MiniLM-L6-v2 (or a checkpoint of ours) on GLUE SST-2, MRPC (the paraphrase task; QQP is not in
../shared) and STS-B.

    python benchmarks/studies/bench_multitask.py --glue ../shared/data/glue/glue_data --model MINILM_DIR \\
        --work /tmp/bench-mt --seeds 1 2 3 --limit-train 512 --epochs 2 [--rows fusion average ...]
    python benchmarks/studies/bench_multitask.py --glue ../shared/data/glue/glue_data \\
        --checkpoint benchmarks/runs/quality/MLM_only.s1/checkpoint_last.pt \\
        --tokenizer-from benchmarks/runs/data/prepared/data-bin --work /tmp/bench-mt-small --seeds 1 2 3

The "baseline: ..." rows score the pair tasks of the start and of the contrastively pre-trained
encoder by the cosine of the two [CLS] vectors (no heads, no training; no sentiment head, so
sentiment and Overall n/a). The "table1/..." rows are seed 004's Table 1 configuration: only the
sentiment head trained (with the contrastive objective on the three datasets' sentences), the pair
tasks scored by the same checkpoint's [CLS] cosine (``--pair-tasks cosine``, its checkpoint_last:
validation logs sentiment only); table1/baseline is §4.3's baseline, the start fine-tuned on SST
alone. The rows "fusion", "supervised-first" and "contrastive-first" train all three heads (not
Table 1's configuration).

Each row is a real fairseq-train run (CPU, small budgets) scored by clear-eval-multitask's code on
the dev sets (sentiment acc, paraphrase acc, STS Pearson, Overall = their mean); the ensemble row
combines the three single-task runs per task (the seed's per-task ensemble, selected on dev).
Writes benchmarks/results/multitask.json (every run's numbers, the commands, the budgets) and,
with matplotlib, benchmarks/results/multitask.png. Numbers are this machine's: none is quoted by hand.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py)

FAIRSEQ_TRAIN = common.bin_path("fairseq-train")

#: Table 1's configuration (seed 004 §4.2, §5.3): the sentiment head only, contrastive on the three datasets
TABLE1 = ["--tasks", "sentiment", "--contrastive-tasks", "sentiment,paraphrase,sts"]
#: row -> (contrastive pre-training first, fairseq-train task options, how the pair tasks are scored:
#: "heads" = their heads, checkpoint_best; "cosine" = the [CLS] cosine, checkpoint_last)
ROWS = {
    "no-pretrain/average": (False, ["--schedule", "average"], "heads"),
    "pretrain/average": (True, ["--schedule", "average"], "heads"),
    "pretrain/round-robin-batch": (True, ["--schedule", "round-robin-batch"], "heads"),
    "pretrain/round-robin-epoch": (True, ["--schedule", "round-robin-epoch"], "heads"),
    "pretrain/pcgrad": (True, ["--schedule", "average", "--pcgrad"], "heads"),
    "fusion": (False, ["--schedule", "fusion"], "heads"),
    "supervised-first": (False, ["--schedule", "supervised-first", "--first-phase-epochs", "1"], "heads"),
    "contrastive-first": (False, ["--schedule", "contrastive-first", "--first-phase-epochs", "1"], "heads"),
    "single/sentiment": (True, ["--tasks", "sentiment"], "heads"),
    "single/paraphrase": (True, ["--tasks", "paraphrase"], "heads"),
    "single/sts": (True, ["--tasks", "sts"], "heads"),
    "table1/baseline": (False, ["--tasks", "sentiment", "--schedule", "average"], "cosine"),
    "table1/contrastive-first": (False, [*TABLE1, "--schedule", "contrastive-first", "--first-phase-epochs", "1"],
                                 "cosine"),
    "table1/supervised-first": (False, [*TABLE1, "--schedule", "supervised-first", "--first-phase-epochs", "1"],
                                "cosine"),
    "table1/fusion": (False, [*TABLE1, "--schedule", "fusion", "--fusion-task", "sentiment"], "cosine"),
}


def run(cmd, log):
    """A child (the console scripts of this interpreter, in the repository) with its output in ``log``."""
    common.run(cmd, log, threads=int(os.environ.get("OMP_NUM_THREADS", "2")))


def majority(data):
    """The accuracy of always answering the most frequent dev label (sentiment, paraphrase): the floor
    a classification head must beat."""
    out = {}
    for task in ("sentiment", "paraphrase"):
        labels = (Path(data) / task / "label" / "valid.label").read_text().split()
        out[f"{task}_acc"] = max(labels.count(v) for v in set(labels)) / len(labels)
    return out


def train_seconds(log):
    """The run's wall-clock seconds at its last logged update or validation (fairseq's json log)."""
    wall = None
    for stats in common.log_records(log, ("train_inner", "train")):
        wall = stats.get("wall", wall)
    return float(wall) if wall is not None else None


def model_args(init):
    from fairseq_clear.continued import model_args as args_of

    return args_of(str(init))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--glue", required=True, help="glue_data/ (SST-2, MRPC, STS-B)")
    start = p.add_mutually_exclusive_group(required=True)
    start.add_argument("--model", help="a Hugging Face model directory (all-MiniLM-L6-v2)")
    start.add_argument("--checkpoint", help="a checkpoint of ours (e.g. the quality benchmark's MLM-only encoder)")
    p.add_argument("--tokenizer-from", help="--checkpoint: the data directory whose dict.txt and tokenizer it uses")
    p.add_argument("--work", required=True, help="work directory")
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--limit-train", type=int, default=512, help="train rows per task")
    p.add_argument("--limit-valid", type=int, default=400, help="dev rows per task")
    p.add_argument("--epochs", type=int, default=2, help="fine-tuning epochs (seed: 10)")
    p.add_argument("--pretrain-epochs", type=int, default=1, help="contrastive pre-training epochs (seed: 5)")
    p.add_argument("--lr", default="2e-5", help="fine-tuning lr (seed: 1e-5; small budgets need more)")
    p.add_argument("--existing-only", action="store_true",
                   help="train nothing: summarise the runs already in --work (several invocations, one table)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "multitask.json"))
    args = p.parse_args()
    for name in ('glue', 'model', 'work', 'checkpoint', 'tokenizer_from', 'out'):  # the children run in the repository
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    if args.checkpoint:
        if not args.tokenizer_from:
            p.error("--checkpoint needs --tokenizer-from (the directory with its dict.txt and tokenizer)")
        model, init = Path(args.tokenizer_from), Path(args.checkpoint)
    else:
        model = work / "model"
        init = model / "model.pt"
        if not init.is_file():
            run([py, "-m", "fairseq_clear.cli.import_hf", args.model, model], work / "import.log")
    data = work / "data"
    if not (data / "multitask.json").is_file():
        run([py, "-m", "fairseq_clear.cli.prepare_multitask", "--glue-dir", args.glue, "--paraphrase", "MRPC",
             "--tokenizer-from", model, "--out", data, "--limit-train", args.limit_train,
             "--limit-valid", args.limit_valid], work / "prepare.log")
    pairs = work / "pairs"
    if not (pairs / "pairs.json").is_file():
        run([py, "-m", "fairseq_clear.cli.prepare_pairs", "--train", Path(args.glue) / "MRPC" / "train.tsv",
             "--format", "mrpc", "--negative-pairs", "--data", model, "--out", pairs], work / "pairs.log")
    margs = model_args(init)
    # a small encoder of ours has 64 positions; MiniLM 512 (the seed: 128 tokens)
    positions = int(margs[margs.index("--max-positions") + 1]) if "--max-positions" in margs else 512
    tokens = str(min(128, positions))
    from fairseq_clear.evaluation.multitask.scoring import evaluate, evaluate_cosine

    train_options = ["--user-dir", REPO / "fairseq_clear", "--cpu", "--num-workers", "0", "--optimizer", "adam",
              "--lr-scheduler", "fixed", "--batch-size", "16", "--no-epoch-checkpoints", "--log-format", "json",
              "--log-interval", "20", "--tokens-per-sample", tokens, "--sentence-pooling", "cls"]
    results = {"budget": vars(args), "runs": []}

    def baseline(row, checkpoint, seed):
        scored = Path(checkpoint).with_suffix(".cosine.json")  # scored once, beside the checkpoint
        if not scored.is_file():
            scored.write_text(json.dumps(evaluate_cosine([str(checkpoint)], str(data), "valid")["rows"][0]))
        entry = {"row": row, "seed": seed, **json.loads(scored.read_text())}
        results["runs"].append(entry)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in entry.items()}), flush=True)

    results["runs"].append({"row": "majority class of the dev labels", "seed": None, **majority(data)})
    for seed in args.seeds:
        pre = work / f"pretrain-s{seed}"
        if (any(ROWS[r][0] for r in args.rows) and not (pre / "checkpoint_last.pt").is_file()
                and not args.existing_only):
            run([FAIRSEQ_TRAIN, pairs, "--task", "contrastive_pairs", "--negative-pairs", "--criterion", "clear",
                 "--loss-form", "simcse", "--temperature", "0.05", "--projection-layers", "2",
                 "--projection-output-activation-fn", "linear", "--finetune-from-model", init, *margs, *train_options,
                 "--lr", "2e-5", "--max-epoch", args.pretrain_epochs, "--disable-validation", "--seed", seed,
                 "--save-dir", pre], work / f"pretrain-s{seed}.log")
        if seed == args.seeds[0]:  # no training: the same for every seed
            baseline("baseline: start, cosine of [CLS]", init, seed)
        if (pre / "checkpoint_last.pt").is_file():
            baseline("baseline: pre-trained, cosine of [CLS]", pre / "checkpoint_last.pt", seed)
        for row in args.rows:
            pretrain, options, pair_tasks = ROWS[row]
            save = work / f"{row.replace('/', '-')}-s{seed}"
            if not (save / "checkpoint_last.pt").is_file() and args.existing_only:
                continue
            if not (save / "checkpoint_last.pt").is_file():
                run([FAIRSEQ_TRAIN, data, "--task", "multitask", "--criterion", "multitask", *options,
                     "--finetune-from-model", pre / "checkpoint_last.pt" if pretrain else init, *margs, *train_options,
                     "--lr", args.lr, "--max-epoch", args.epochs, "--seed", seed, "--save-dir", save,
                     "--best-checkpoint-metric", "overall", "--maximize-best-checkpoint-metric"],
                    work / f"{save.name}.log")
            scored = save / "dev.json"  # scored once: a later invocation reads it
            if not scored.is_file():
                if pair_tasks == "cosine":  # validation logged sentiment only: the last epoch's model
                    result = evaluate_cosine([str(save / "checkpoint_last.pt")], str(data), "valid")
                else:
                    result = evaluate([str(save / "checkpoint_best.pt")], str(data), "valid")
                scored.write_text(json.dumps(result["rows"][0]))
            entry = {"row": row, "seed": seed, "train_seconds": train_seconds(work / f"{save.name}.log"),
                     **json.loads(scored.read_text())}
            results["runs"].append(entry)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in entry.items()}), flush=True)
        singles = [work / f"single-{t}-s{seed}" / "checkpoint_best.pt" for t in ("sentiment", "paraphrase", "sts")]
        if all(s.is_file() for s in singles):
            ens = evaluate([str(s) for s in singles], str(data), "valid", "per-task", "valid")["ensemble"]
            results["runs"].append({"row": "ensemble (single-task, per-task)", "seed": seed, **ens})
            print(json.dumps({"row": "ensemble", "seed": seed, "overall": ens["overall"]}), flush=True)
    summarise(results, Path(args.out), Path(args.checkpoint or args.model).name, len(args.seeds))


#: the seed's orderings (Tables 1, 2, 6, 7): (claim, higher row, lower row, metric)
CLAIMS = [
    ("Table 1: fusion > supervised-first", "table1/fusion", "table1/supervised-first", "overall"),
    ("Table 1: supervised-first > contrastive-first", "table1/supervised-first", "table1/contrastive-first",
     "overall"),
    ("Table 1: fusion > the baseline (the SST-trained start)", "table1/fusion", "table1/baseline", "overall"),
    ("Table 1's ordering with all three heads trained (not its configuration): fusion > supervised-first",
     "fusion", "supervised-first", "overall"),
    ("Table 1's ordering with all three heads trained (not its configuration): supervised-first > "
     "contrastive-first", "supervised-first", "contrastive-first", "overall"),
    ("all three heads trained: fusion > the start's [CLS] cosine (paraphrase and STS only)", "fusion",
     "baseline: start, cosine of [CLS]", "para_sts"),
    ("Table 2: contrastive pre-training helps the average loss", "pretrain/average", "no-pretrain/average",
     "overall"),
    ("Table 2: the ensemble > the average-loss model", "ensemble (single-task, per-task)", "pretrain/average",
     "overall"),
    ("Table 2: single-task training helps paraphrase", "single/paraphrase", "pretrain/average", "paraphrase_acc"),
    ("Table 2: single-task training does not help sentiment", "pretrain/average", "single/sentiment",
     "sentiment_acc"),
    ("Table 2: single-task training does not help STS", "pretrain/average", "single/sts", "sts_pearson"),
    ("Table 6: average > round-robin by batch", "pretrain/average", "pretrain/round-robin-batch", "overall"),
    ("Table 6: average > round-robin by epoch", "pretrain/average", "pretrain/round-robin-epoch", "overall"),
    ("Table 7: average > PCGrad", "pretrain/average", "pretrain/pcgrad", "overall"),
]


def observations(summary):
    """{claim: holds, difference of the means, the larger of the two rows' std over seeds} for the
    seed's orderings whose rows ran. 'para_sts' = the mean of paraphrase acc and STS Pearson (the
    metrics a cosine baseline has)."""
    def cell(row, metric):
        cols = summary[row]
        if metric == "para_sts":
            return ((cols["paraphrase_acc"]["mean"] + cols["sts_pearson"]["mean"]) / 2,
                    max(cols["paraphrase_acc"]["std"], cols["sts_pearson"]["std"]))
        return cols[metric]["mean"], cols[metric]["std"]

    out = {}
    for claim, high, low, metric in CLAIMS:
        if high in summary and low in summary:
            (a, sa), (b, sb) = cell(high, metric), cell(low, metric)
            out[claim] = {"holds": bool(a > b), "difference": a - b, "std": max(sa, sb)}
    return out


def summarise(results, out, start_name, seeds):
    """Mean and std over seeds per row (None cells, e.g. a baseline's sentiment, left out), the
    table printed, the JSON and a 4-panel plot written."""
    summary = {}
    for entry in results["runs"]:
        for key in ("overall", "sentiment_acc", "paraphrase_acc", "sts_pearson"):
            if entry.get(key) is not None:
                summary.setdefault(entry["row"], {}).setdefault(key, []).append(entry[key])
    results["summary"] = {row: {k: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                                for k, v in cols.items()} for row, cols in summary.items()}
    print(f"{'row':<40} {'Overall':>8} {'Sent.':>8} {'Para.':>8} {'STS r':>8}  (dev, mean over seeds; "
          "table1/*: pair tasks by [CLS] cosine)")
    for row, cols in results["summary"].items():
        cells = [cols.get(k, {}).get("mean", float("nan")) for k in ("overall", "sentiment_acc", "paraphrase_acc", "sts_pearson")]
        print(f"{row:<40} " + " ".join(f"{c:8.3f}" for c in cells))
    results["observations"] = observations(results["summary"])
    for claim, o in results["observations"].items():
        print(f"{'holds' if o['holds'] else 'does not hold'}: {claim} ({o['difference']:+.3f}, "
              f"seeds' std {o['std']:.3f})")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = list(results["summary"])
        keys = [("overall", "Overall"), ("sentiment_acc", "sentiment acc"),
                ("paraphrase_acc", "paraphrase acc"), ("sts_pearson", "STS Pearson")]
        fig, axes = plt.subplots(1, 4, figsize=(16, 0.35 * len(rows) + 1.5), sharey=True)
        for ax, (key, label) in zip(axes, keys):
            cells = [results["summary"][r].get(key) for r in rows]
            ax.barh(rows, [c["mean"] if c else 0 for c in cells], xerr=[c["std"] if c else 0 for c in cells])
            ax.set_xlabel(f"dev {label}")
        axes[0].invert_yaxis()  # the shared y axis: rows top-down in table order
        fig.suptitle(f"seed 004 in miniature ({start_name}; mean ± std over {seeds} seeds)")
        fig.tight_layout()
        fig.savefig(out.with_suffix(".png"))
    except ImportError:
        pass


if __name__ == "__main__":
    main()
