"""Training cost of ``--task clear`` against fairseq's own masked LM (issue 6, parts 1 and 2).

    python benchmarks/bench_train_speed.py [--quick]

Every configuration is a real ``fairseq-train`` run (through
benchmarks/fairseq_train_timed.py, which times each ``Trainer.train_step``) on the
same binarized sentences, with the same model shape, the same sentences per update
and the same seed:

* ``masked_lm``: fairseq's ``--task masked_lm --criterion masked_lm
  --sample-break-mode eos --arch roberta``;
* ``clear --mlm-only``: our task and criterion without views (the cost of our code
  on plain MLM);
* ``clear`` with each augmentation and the paper's compositions (Table 1).

The data has no empty lines and ``--required-batch-size-multiple 1``, so both tasks
order the sentences by length and cut the same batches in the same order: batch k
holds sentences of the same lengths in both runs (checked on every timed batch: the
same tokens and padding). ``--task clear`` regroups sentences of equal length every
epoch and fairseq fixes them once, so the sentences themselves may differ.
Runs alternate (round r runs every configuration once, in a rotated order), each
process pinned to one CPU with one math thread; the first ``--warmup`` updates of
a run are discarded. Per update index the median over rounds is taken; the ratio
is the sum of those medians against masked_lm's, next to the token floor
(tokens in s + s~1 + s~2) / tokens in s counted on the same batches (and the
padded floor, counting padding). Goal: ratio <= 1.10 x floor. Also: peak resident
memory of each process, and the share of wall time between updates (waiting for
the batch). Writes benchmarks/results/train_speed.json.
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

GOAL_FACTOR = 1.10
AUGMENTATIONS = ["del-word", "del-span", "reorder", "subs",
                 "subs,del-word", "subs,del-span", "del-word,reorder", "del-span,reorder"]
QUICK_AUGMENTATIONS = ["del-word", "del-span", "subs,del-span"]


def model_args(layers, dim, heads):
    return ["--encoder-layers", layers, "--encoder-embed-dim", dim, "--encoder-ffn-embed-dim", 4 * dim,
            "--encoder-attention-heads", heads, "--max-positions", common.TOKENS_PER_SAMPLE]


def configs(augmentations, synonyms):
    out = [("masked_lm", ["--task", "masked_lm", "--criterion", "masked_lm",
                          "--sample-break-mode", "eos", "--arch", "roberta"])]
    clear = ["--user-dir", common.USER_DIR, "--task", "clear", "--criterion", "clear", "--arch", "clear_roberta"]
    out.append(("clear --mlm-only", clear + ["--mlm-only"]))
    for a in augmentations:
        extra = ["--synonym-table", synonyms] if "subs" in a else []
        out.append((f"clear {a}", clear + ["--augmentations", a] + extra))
    return out


def run_one(name, task_args, common_args, out_json, log, cpu):
    cmd = [sys.executable, common.TIMED_TRAIN, "--bench-out", out_json, *common_args, *task_args]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    common.run(cmd, log, threads=1)
    return common.read_json(out_json)


def summarize(runs, warmup):
    """runs: {name: [result of each round]} → per-configuration statistics.

    Wall time (the goal's measure) and process CPU time (all threads; less
    sensitive to other jobs on the machine) are both summarised.
    """
    base = runs["masked_lm"]
    n_updates = min(len(r["records"]) for rs in runs.values() for r in rs)
    timed = range(warmup, n_updates)

    def per_update_medians(rs, step_key, gap_key):
        return [common.median([r["records"][k][step_key] + (r["records"][k][gap_key] or 0) for r in rs])
                for k in timed]

    base_wall = per_update_medians(base, "step_s", "gap_s")
    base_cpu = per_update_medians(base, "step_cpu_s", "gap_cpu_s")
    out = {}
    for name, rs in runs.items():
        recs = rs[0]["records"]
        # --task clear regroups sentences of equal length every epoch (EpochShuffledDataset), fairseq
        # fixes them once: batch k holds sentences of the same lengths in both, not the same sentences
        shapes_match = all((r["records"][k]["s_tokens"], r["records"][k]["s_padded"]) ==
                           (base[0]["records"][k]["s_tokens"], base[0]["records"][k]["s_padded"])
                           for r in rs for k in timed)
        ids_match = all(r["records"][k]["ids"] == base[0]["records"][k]["ids"] for r in rs for k in timed)
        wall = per_update_medians(rs, "step_s", "gap_s")
        cpu = per_update_medians(rs, "step_cpu_s", "gap_cpu_s")
        s = sum(recs[k]["s_tokens"] for k in timed)
        v = sum(recs[k]["views_tokens"] for k in timed)
        s_pad = sum(recs[k]["s_padded"] for k in timed)
        v_pad = sum(recs[k]["views_padded"] for k in timed)
        steps = [r["records"][k]["step_s"] for r in rs for k in timed]
        gaps = [r["records"][k]["gap_s"] or 0 for r in rs for k in timed]
        ratio = sum(wall) / sum(base_wall)
        ratio_cpu = sum(cpu) / sum(base_cpu)
        floor = (s + v) / s
        out[name] = {
            "median_update_s": round(common.median(steps), 4),
            "sum_of_median_update_s": round(sum(wall), 3),
            "ratio_vs_masked_lm": round(ratio, 3),
            "cpu_ratio_vs_masked_lm": round(ratio_cpu, 3),
            "token_floor": round(floor, 3),
            "padded_floor": round((s_pad + v_pad) / s_pad, 3),
            "ratio_over_floor": round(ratio / floor, 3),
            "cpu_ratio_over_floor": round(ratio_cpu / floor, 3),
            "meets_goal": (ratio <= GOAL_FACTOR * floor) if name != "masked_lm" else None,
            "s_tokens": s, "views_tokens": v, "s_padded": s_pad, "views_padded": v_pad,
            "sentences_per_update": recs[warmup]["sentences"],
            "data_wait_share": round(sum(gaps) / (sum(gaps) + sum(steps)), 4),
            "peak_rss_mb": round(common.median([r["peak_rss_mb"] for r in rs]), 1),
            "same_batch_shapes_as_masked_lm": shapes_match,
            "same_sentences_as_masked_lm": ids_match,
            "rounds": len(rs),
            "timed_updates_per_round": len(timed),
        }
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 augmentations, 1 round, fewer updates")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=8, help="timed updates per run")
    parser.add_argument("--warmup", type=int, default=2, help="updates discarded at the start of each run")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per update")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--augmentations", help="';'-separated compositions to time (default: the paper's)")
    parser.add_argument("--cpu", type=int, default=None,
                        help="CPU to pin every run to (default: the last one; -1: no pinning)")
    parser.add_argument("--out", default=str(common.RESULTS / "train_speed.json"))
    args = parser.parse_args()
    augmentations = AUGMENTATIONS
    if args.quick:
        args.rounds, args.updates, augmentations = 1, min(args.updates, 6), QUICK_AUGMENTATIONS
    if args.augmentations is not None:
        augmentations = [a for a in args.augmentations.split(";") if a]
    cpu = args.cpu
    if cpu is None:
        cpu = sorted(os.sched_getaffinity(0))[-1]
    if cpu < 0 or not common.shutil.which("taskset"):
        cpu = None

    data = common.prepare_corpus(common.RUNS / "logs")
    synonyms = common.RUNS / "data" / "synonyms.json"
    if not synonyms.is_file():
        common.run([common.bin_path("clear-synonyms"), "counterfitted", common.SYNONYMS_JSON, synonyms])
    work = common.RUNS / "speed"
    common_args = [
        data["sentences_bin"], "--tokens-per-sample", common.TOKENS_PER_SAMPLE,
        "--batch-size", args.batch_size, "--required-batch-size-multiple", 1,
        *model_args(args.layers, args.dim, args.heads),
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
        "--lr", "5e-4", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10",
        "--total-num-update", "1000", "--max-update", args.warmup + args.updates,
        "--cpu", "--num-workers", "0", "--seed", "1", "--disable-validation", "--no-save",
        "--save-dir", work / "no_save",  # else fairseq would resume from ./checkpoints if it exists
        "--log-format", "json", "--log-interval", "1000",
    ]
    cfgs = configs(augmentations, synonyms)
    runs = {name: [] for name, _ in cfgs}
    load_before = os.getloadavg()
    others_before = common.other_jobs()
    for r in range(args.rounds):
        order = cfgs[r % len(cfgs):] + cfgs[: r % len(cfgs)]
        for name, task_args in order:
            slug = name.replace(" ", "_").replace(",", "+").replace("--", "")
            res = run_one(name, task_args, common_args, work / f"{slug}.r{r}.json",
                          work / "logs" / f"{slug}.r{r}.log", cpu)
            runs[name].append(res)
            step = common.median([x["step_s"] for x in res["records"][args.warmup:]])
            print(f"round {r + 1}/{args.rounds}  {name:28s} median update {step:.3f} s  "
                  f"peak RSS {res['peak_rss_mb']:.0f} MB", flush=True)
    summary = summarize(runs, args.warmup)
    result = {
        "command": " ".join(["python", "benchmarks/bench_train_speed.py"] + sys.argv[1:]),
        "model": {"layers": args.layers, "embed_dim": args.dim, "ffn_dim": 4 * args.dim, "heads": args.heads,
                  "vocab": data["vocab_size"], "tokens_per_sample": common.TOKENS_PER_SAMPLE},
        "batch_sentences": args.batch_size,
        "rounds": args.rounds, "warmup_updates": args.warmup, "timed_updates": args.updates,
        "pinned_cpu": cpu, "threads": 1,
        "goal": f"ratio <= {GOAL_FACTOR} x token floor",
        "fairseq_command_common": [str(a) for a in common_args],
        "configs": {name: [str(a) for a in task_args] for name, task_args in cfgs},
        "results": summary,
        "machine": common.machine(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "other_jobs_before": others_before,
        "other_jobs_after": common.other_jobs(),
    }
    common.write_json(args.out, result)
    print(f"\n{'configuration':28s} {'update s':>9s} {'ratio':>7s} {'cpu':>7s} {'floor':>7s} {'padded':>7s} "
          f"{'ratio/floor':>11s} {'wait':>6s} {'RSS MB':>7s}")
    for name, s in summary.items():
        print(f"{name:28s} {s['median_update_s']:9.3f} {s['ratio_vs_masked_lm']:7.3f} "
              f"{s['cpu_ratio_vs_masked_lm']:7.3f} {s['token_floor']:7.3f} "
              f"{s['padded_floor']:7.3f} {s['ratio_over_floor']:11.3f} {100 * s['data_wait_share']:5.1f}% "
              f"{s['peak_rss_mb']:7.0f}" + ("" if s["same_batch_shapes_as_masked_lm"] else "  (batch shapes differ!)"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
