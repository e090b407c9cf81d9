#!/usr/bin/env python
"""Issue 31's quality runs: what the negatives options and Matryoshka do to STS, from
all-MiniLM-L6-v2 trained with supervised SimCSE on SICK and STS-B train pairs.

    python benchmarks/studies/bench_negatives_quality.py --model MINILM_DIR --sts-dir ../shared/data/sts \\
        --work /tmp/bench-neg --seeds 1 2 3 [--epochs 1] [--rows plain mask-duplicates ...]

Pairs: SICK train (ENTAILMENT) and STS-B train (score > 4), as clear-prepare-pairs reads them.
Hard negatives for the same (anchor, positive) rows two ways: mined by clear-mine-negatives with
the start model (1 per anchor, relative margin 0.05: a candidate scoring above 95% of the
positive's similarity is not a negative, NV-Retriever's rule) and drawn at random from the other
rows' sentences. Each row is a real fairseq-train run (SimCSE's loss, tau 0.05, lr 5e-5, batch 64,
32 tokens, MiniLM's mean pooling, no projection head so that Matryoshka trains the vectors embed()
returns), scored by clear-eval-sts (Spearman x100, SimCSE's protocol, test splits) at the full size
and truncated to 256/128/64/32:

* ``plain``: in-batch negatives only;            ``mask-duplicates``: ``--mask-duplicates``;
* ``guide``: ``--guide-model`` = the start model (GISTEmbed's guide, frozen);
* ``random-negative`` / ``mined-negative``: the two hard-negative files;
* ``matryoshka``: ``--matryoshka-dims 384,256,128,64,32``;
* ``trained-at-D``: ``--matryoshka-dims D`` only (the loss sees the first D dimensions: the model
  trained at that size that Matryoshka is compared with).

Writes benchmarks/results/negatives_quality.json (every run, the commands, the masked counts from
the training logs) and, with matplotlib, negatives_quality.png. No number is quoted by hand.
"""

import argparse
import csv
import json
import os
import random
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py)

FAIRSEQ_TRAIN = common.bin_path("fairseq-train")

FULL, SIZES = 384, (256, 128, 64, 32)  # all-MiniLM-L6-v2 is 384 wide
#: row -> (data: pairs | random | mined, extra fairseq-train options)
ROWS = {
    "plain": ("pairs", []),
    "mask-duplicates": ("pairs", ["--mask-duplicates"]),
    "guide": ("pairs", ["--guide-model", "{model}"]),
    "random-negative": ("random", []),
    "mined-negative": ("mined", []),
    "matryoshka": ("pairs", ["--matryoshka-dims", "384,256,128,64,32"]),
    **{f"trained-at-{d}": ("pairs", ["--matryoshka-dims", str(d)]) for d in SIZES},
    # issue 44: hardness weighting (Lan et al. 2025's strength for in-batch negatives; EmbeddingGemma's
    # for mined hard negatives)
    "hardness": ("pairs", ["--hardness-mode", "in_batch_negatives", "--hardness-strength", "9"]),
    "mined-negative hardness": ("mined", ["--hardness-mode", "hard_negatives", "--hardness-strength", "5"]),
}
TASKS = "STS13,STS16,STS-B,SICK-R"  # SICK-R and STS-B in domain, STS13/16 not; STS12, 14, 15 left out for time


def run(cmd, log):
    """A child (the console scripts of this interpreter, in the repository) with its output in ``log``."""
    common.run(cmd, log, threads=int(os.environ.get("OMP_NUM_THREADS", "2")))


def write_csv(path, rows, header):
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def log_stats(log):
    """From the run's json log: the dup_masked / guide_masked counts summed over its updates, and the
    wall-clock seconds at its last update (a cached run keeps its own time)."""
    totals = {}
    for stats in common.log_records(log):
        for key in ("dup_masked", "guide_masked"):
            if key in stats:
                totals[key] = totals.get(key, 0.0) + float(stats[key])
        totals["train_seconds"] = float(stats["wall"]) if "wall" in stats else None
    return totals


def score(py, checkpoint, model, sts_dir, out, log):
    run([py, "-m", "fairseq_clear.cli.eval_sts", "--checkpoint", checkpoint, "--data", model, "--cpu",
         "--sts-dir", sts_dir, "--tasks", TASKS, "--poolings", "mean", "--align-uniform-split", "none",
         "--truncate-dims", ",".join(map(str, SIZES)), "--output", out], log)
    return json.loads(Path(out).read_text())


def averages(result):
    """{size: STS avg} of the one model in clear-eval-sts's JSON (poolings 'mean', 'mean@D')."""
    (poolings,) = result["models"].values()
    return {int(key.partition("@")[2] or FULL): cell["table"]["Avg"] for key, cell in poolings.items()}


def full_table(result):
    (poolings,) = result["models"].values()
    return poolings["mean"]["table"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="all-MiniLM-L6-v2 (a Hugging Face model directory)")
    p.add_argument("--sts-dir", required=True, help="../shared/data/sts (SICK, STSBenchmark, STS12-16)")
    p.add_argument("--work", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--epochs", type=int, default=1, help="passes over the pairs (SimCSE: 3)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "negatives_quality.json"))
    args = p.parse_args()
    for name in ('model', 'sts_dir', 'work', 'out'):  # the children run in the repository
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    py = sys.executable
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sts = Path(args.sts_dir)
    train = [sts / "SICK" / "SICK_train.txt", sts / "STSBenchmark" / "sts-train.csv"]
    model = work / "model"
    if not (model / "model.pt").is_file():
        run([py, "-m", "fairseq_clear.cli.import_hf", args.model, model], work / "import.log")
    init = model / "model.pt"

    # the (anchor, positive) rows, mined negatives for them, random ones for the same rows
    mined_csv = work / "mined.csv"
    if not mined_csv.is_file():
        run([py, "-m", "fairseq_clear.cli.mine_negatives", "--train", *train, "--checkpoint", init, "--data", model,
             "--cpu", "--num-negatives", "1", "--relative-margin", "0.05", "--out", mined_csv], work / "mine.log")
    with open(mined_csv, encoding="utf-8", newline="") as f:
        mined = list(csv.reader(f))[1:]
    texts = sorted({t for row in mined for t in row[:2]})
    rng = random.Random(12)
    rand = []
    for a, pos, _ in mined:
        while True:
            neg = rng.choice(texts)
            if neg not in (a, pos):
                break
        rand.append((a, pos, neg))
    write_csv(work / "pairs.csv", [r[:2] for r in mined], ["sent0", "sent1"])
    write_csv(work / "random.csv", rand, ["sent0", "sent1", "hard_neg"])
    bins = {}
    for name, path in (("pairs", work / "pairs.csv"), ("random", work / "random.csv"), ("mined", mined_csv)):
        bins[name] = work / f"{name}-bin"
        if not (bins[name] / "pairs.json").is_file():
            run([py, "-m", "fairseq_clear.cli.prepare_pairs", "--train", path, "--format", "simcse-csv",
                 "--data", model, "--out", bins[name]], work / f"prepare-{name}.log")

    from fairseq_clear.continued import model_args

    margs = model_args(str(init))
    updates = max(1, args.epochs * len(mined) // 64)
    train_options = ["--user-dir", REPO / "fairseq_clear", "--task", "contrastive_pairs", "--tokens-per-sample", "32",
              "--criterion", "clear", "--loss-form", "simcse", "--temperature", "0.05", "--hard-negative-weight", "0",
              "--sentence-pooling", "mean", "--projection-layers", "0", "--finetune-from-model", init, *margs,
              "--optimizer", "adam", "--adam-betas", "(0.9,0.999)", "--lr", "5e-5", "--lr-scheduler",
              "polynomial_decay", "--warmup-updates", "0", "--total-num-update", updates, "--max-update", updates,
              "--batch-size", "64", "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
              "--log-format", "json", "--log-interval", "1"]
    results = {"budget": {**vars(args), "pairs": len(mined), "updates": updates, "tasks": TASKS},
               "mining": json.loads((work / "mined.json").read_text())["counts"], "runs": []}
    start_json = work / "start.sts.json"
    start = averages(score(py, init, model, sts, start_json, work / "start.sts.log") if not start_json.is_file()
                     else json.loads(start_json.read_text()))
    results["start"] = start
    print(json.dumps({"row": "start", "avg": start}), flush=True)
    for seed in args.seeds:
        for row in args.rows:
            data, options = ROWS[row]
            save = work / f"{row}-s{seed}"
            if not (save / "checkpoint_last.pt").is_file():
                run([FAIRSEQ_TRAIN, bins[data], *train_options, *[o.format(model=model) for o in options],
                     "--seed", seed, "--save-dir", save], work / f"{save.name}.log")
            out = save / "sts.json"
            result = json.loads(out.read_text()) if out.is_file() else score(
                py, save / "checkpoint_last.pt", model, sts, out, work / f"{save.name}.sts.log")
            entry = {"row": row, "seed": seed, "avg": averages(result), "tasks": full_table(result),
                     **log_stats(work / f"{save.name}.log")}
            results["runs"].append(entry)
            print(json.dumps(entry), flush=True)
    summarise(results, args)


def observations(summary):
    """{claim: holds, difference of the means (STS avg points), the larger std over seeds} for the
    comparisons the issue asks about, where both rows ran."""
    claims = [(f"{row} > plain", row, "plain", FULL) for row in ("mask-duplicates", "guide", "mined-negative",
                                                                 "hardness")]
    claims.append(("mined > random hard negatives", "mined-negative", "random-negative", FULL))
    claims.append(("mined-negative hardness > mined-negative", "mined-negative hardness", "mined-negative", FULL))
    claims.append(("matryoshka at full size >= plain", "matryoshka", "plain", FULL))
    for d in SIZES:
        claims.append((f"matryoshka > plain, truncated to {d}", "matryoshka", "plain", d))
        claims.append((f"matryoshka at {d} >= the model trained at {d}", "matryoshka", f"trained-at-{d}", d))
    out = {}
    for claim, high, low, size in claims:
        a, b = summary.get(high, {}).get(str(size)), summary.get(low, {}).get(str(size))
        if a and b:
            out[claim] = {"holds": bool(a["mean"] >= b["mean"] if ">=" in claim else a["mean"] > b["mean"]),
                          "difference": a["mean"] - b["mean"], "std": max(a["std"], b["std"])}
    return out


def summarise(results, args):
    table = {}
    for entry in results["runs"]:
        for size, value in entry["avg"].items():
            table.setdefault(entry["row"], {}).setdefault(int(size), []).append(value)
    results["summary"] = {row: {str(s): {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                                for s, v in sorted(cols.items(), reverse=True)} for row, cols in table.items()}
    sizes = (FULL, *SIZES)
    print(f"{'row':<18} " + " ".join(f"{s:>12}" for s in sizes) + "   (STS avg, mean ± std over seeds)")
    print(f"{'start':<18} " + " ".join(f"{results['start'].get(s, float('nan')):12.2f}" for s in sizes))
    for row, cols in results["summary"].items():
        print(f"{row:<18} " + " ".join(f"{cols[str(s)]['mean']:6.2f} ±{cols[str(s)]['std']:4.2f}" if str(s) in cols
                                        else f"{'':>12}" for s in sizes))
    results["observations"] = observations(results["summary"])
    for claim, o in results["observations"].items():
        print(f"{'holds' if o['holds'] else 'does not hold'}: {claim} ({o['difference']:+.2f}, "
              f"seeds' std {o['std']:.2f})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    s = results["summary"]
    options = [r for r in ("plain", "mask-duplicates", "guide", "random-negative", "mined-negative", "hardness",
                           "mined-negative hardness") if r in s]
    if options:  # --rows may hold only the Matryoshka rows
        full = [s[r][str(FULL)] for r in options]
        left.barh(options, [c["mean"] for c in full], xerr=[c["std"] for c in full])
        left.axvline(results["start"][FULL], color="grey", ls="--", label="start (all-MiniLM-L6-v2)")
        left.set_xlim(min(c["mean"] for c in full) - 3, max(c["mean"] for c in full) + 2)
        left.invert_yaxis()
        left.set_xlabel("STS avg (Spearman x100), full size")
        left.legend(loc="lower right")
    else:
        left.axis("off")
    for row, style in (("plain", "o-"), ("matryoshka", "s-")):
        if row in s:
            right.errorbar(sizes, [s[row][str(d)]["mean"] for d in sizes], [s[row][str(d)]["std"] for d in sizes],
                           fmt=style, label=f"{row}, truncated")
    fixed = [d for d in SIZES if f"trained-at-{d}" in s]
    if fixed:
        right.errorbar(fixed, [s[f"trained-at-{d}"][str(d)]["mean"] for d in fixed],
                       [s[f"trained-at-{d}"][str(d)]["std"] for d in fixed], fmt="^", label="trained at that size")
    right.plot(sizes, [results["start"][d] for d in sizes], "x--", color="grey", label="start, truncated")
    right.set_xscale("log", base=2)
    right.set_xticks(sizes, [str(d) for d in sizes])
    right.set_xlabel("embedding dimensions kept")
    right.set_ylabel("STS avg")
    right.legend()
    fig.suptitle(f"SimCSE-sup from all-MiniLM-L6-v2 on SICK + STS-B train ({len(args.seeds)} seeds)")
    fig.tight_layout()
    fig.savefig(Path(args.out).with_suffix(".png"))


if __name__ == "__main__":
    main()
