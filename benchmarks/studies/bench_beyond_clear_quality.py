"""Quality of issue 44's options at the quality benchmark's scale (BENCHMARKS.md §12).

    python benchmarks/studies/bench_beyond_clear_quality.py [--seeds 1,2,3] [--updates 200] [--rows NAME;NAME]

bench_quality.py's runs (its corpus, model, optimiser, seeds, equal updates, SimCSE protocol STS
average over the 7 tasks, [CLS] and mean pooling; no GLUE), with its own ``run_variant``, ``summarize``
and ``compare``, on these rows:

* SimCSE-unsup (bench_quality's row), + word repetition (``--augmentations word-rep``, ESimCSE's rate
  0.32, ``--word-rep-views``' default), + the momentum queue (``--queue-size`` 2.5 x the batch, ``--queue-momentum 0.995``: ESimCSE's
  values) and ESimCSE (both); the goal: ESimCSE >= +1 STS over SimCSE-unsup;
* the benchmark's best CLEAR row (MLM+del-span+reorder) and the same with InfoCSE's sentence-conditioned
  MLM beside CLEAR's (``--sentence-mlm-layers 2 --sentence-mlm-prob 0.4``, InfoCSE's, at
  ``--sentence-mlm-weight`` 1, the weight of CLEAR's own MLM term (InfoCSE's 1e-5 is scaled to its
  BERT-base losses; here it would make the term 1e5 times smaller than CLEAR's MLM).

``--from-mlm N`` is the papers' setting in miniature: every SimCSE row continues one encoder trained N
updates by bench_quality's MLM-only row (as SimCSE and ESimCSE continue BERT), at ``--continued-lr``,
beside the start's own score (a study of its own: ``from_mlm_N``).

Runs go one at a time (``--jobs``); each finished run is kept and reused by a later invocation (``--merge``
adds rows or seeds to the earlier result). Writes the summary to benchmarks/results/beyond_clear_quality.json
(the full result to benchmarks/runs/results/), a plot beside it, and the table between the
``beyond-clear-quality`` markers of benchmarks/studies/12_beyond_clear.md (BENCHMARKS.md §12 after
``python benchmarks/report.py``).
"""

import argparse
import re
import shlex
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))
import bench_quality  # noqa: E402
import common  # noqa: E402

CLEAR_ROW = "MLM+del-span+reorder"  # the best CLEAR row of quality.json (equal updates)
GOAL_ESIMCSE = 1.0
UPDATES = 200  # the quality benchmark's
SHORT_MOMENTUM = 0.9  # --queue-momentum scaled to a run of UPDATES updates (variants)
WRITEUP = HERE / "12_beyond_clear.md"
MARK = "beyond-clear-quality"


def with_option(args, flag, *values):
    """``args`` with ``flag``'s values replaced (or the flag appended)."""
    args = list(args)
    if flag in args:
        i = args.index(flag)
        args[i + 1:i + 2] = values
        return args
    return args + [flag, *values]


def variants(syn, batch_size):
    """name → bench_quality's spec (kind, extra fairseq-train args, batch multiplier)."""
    base = bench_quality.variants(syn)
    kind, simcse, mult = base["SimCSE-unsup"]
    word_rep = with_option(simcse, "--augmentations", "word-rep") + ["--word-rep-rate", "0.32"]
    queue = ["--queue-size", str(int(2.5 * batch_size)), "--queue-momentum", "0.995"]
    # the momentum encoder's memory, 1 / (1 - m) updates, is 200 at ESimCSE's 0.995: this whole run (it
    # queues vectors of a model close to the untrained start); ESimCSE's run is some 15,600 updates (1M
    # sentences, batches of 64), which 0.9 scales to about the same share of these 200 (10 updates)
    short = with_option(queue, "--queue-momentum", str(SHORT_MOMENTUM))
    ckind, clear, cmult = base[CLEAR_ROW]
    return {
        "SimCSE-unsup": base["SimCSE-unsup"],
        "SimCSE-unsup + word-rep": (kind, word_rep, mult),
        "SimCSE-unsup + queue": (kind, simcse + queue, mult),
        "ESimCSE (word-rep + queue)": (kind, word_rep + queue, mult),
        f"SimCSE-unsup + queue, m {SHORT_MOMENTUM}": (kind, simcse + short, mult),
        f"ESimCSE, m {SHORT_MOMENTUM}": (kind, word_rep + short, mult),
        CLEAR_ROW: base[CLEAR_ROW],
        f"{CLEAR_ROW} + sentence-MLM": (ckind, clear + ["--sentence-mlm-layers", "2", "--sentence-mlm-weight", "1",
                                                        "--sentence-mlm-prob", "0.4"], cmult),
    }


#: (a, b, goal): each option against the row it adds to, at equal updates
COMPARISONS = [
    ("ESimCSE (word-rep + queue)", "SimCSE-unsup", GOAL_ESIMCSE),
    ("SimCSE-unsup + word-rep", "SimCSE-unsup", 0.0),
    ("SimCSE-unsup + queue", "SimCSE-unsup", 0.0),
    (f"ESimCSE, m {SHORT_MOMENTUM}", "SimCSE-unsup", GOAL_ESIMCSE),
    (f"SimCSE-unsup + queue, m {SHORT_MOMENTUM}", "SimCSE-unsup", 0.0),
    (f"{CLEAR_ROW} + sentence-MLM", CLEAR_ROW, 0.0),
    ("SimCSE-unsup", "the start (MLM only)", 0.0),  # --from-mlm
]


def pretrained_start(cfg, updates, seed=1):
    """The starting point of ``--from-mlm``: bench_quality's "MLM only" row trained ``updates`` updates
    (one seed, so every row and seed of the study starts from the same encoder, as the papers' rows start
    from the same BERT), kept under RUNS/beyond_clear_quality/ and reused."""
    import shutil

    save_dir = common.RUNS / "beyond_clear_quality" / f"mlm_start_u{updates}.s{seed}"
    ckpt = save_dir / "checkpoint_last.pt"
    kind, extra, mult = bench_quality.variants(None)["MLM only"]
    key = {"args": extra, "seed": seed, "updates": updates, "batch_size": cfg["batch_size"], "lr": cfg["lr"]}
    if ckpt.is_file() and (save_dir / "key.json").is_file() and common.read_json(save_dir / "key.json") == key:
        return ckpt
    shutil.rmtree(save_dir, ignore_errors=True)
    save_dir.mkdir(parents=True)
    cmd = bench_quality.train_command(cfg, "MLM only", kind, extra, mult, seed, save_dir, updates)
    print(f"  the start: MLM only, {updates} updates (seed {seed})", flush=True)
    common.run(cmd, save_dir / "train.log", threads=1)
    common.write_json(save_dir / "key.json", key)
    return ckpt


def continued(rows, start):
    """The contrastive ``rows`` started from ``start`` (``--finetune-from-model``: its weights; a fresh
    optimiser, schedule and momentum encoder), beside the start itself (one update at a negligible rate)."""
    kind, simcse, mult = rows["SimCSE-unsup"]
    init = ["--finetune-from-model", str(start)]
    out = {"the start (MLM only)": ("init", simcse + init, mult)}
    out.update({name: (k, extra + init, m) for name, (k, extra, m) in rows.items() if k == "simcse"})
    return out


def run_once(cfg, name, spec, seed, updates, tag=""):
    """bench_quality's run_variant, its result kept under RUNS/beyond_clear_quality/ and reused by a later
    invocation for the same row, arguments, seed and updates (runs take minutes on a shared machine)."""
    kind, extra, mult = spec
    key = {"variant": name, "args": [str(a) for a in extra], "seed": seed, "updates": updates,
           "batch_size": cfg["batch_size"]} | ({"lr": cfg["lr"]} if tag else {})
    path = common.RUNS / "beyond_clear_quality" / (f"{name.replace(' ', '_')}.s{seed}"
                                                   + ("" if updates == UPDATES else f".u{updates}") + tag + ".json")
    if path.is_file() and common.read_json(path)["key"] == key:
        return common.read_json(path)["result"]
    result = bench_quality.run_variant(cfg, name, spec, seed, None, updates, do_glue=False)
    common.write_json(path, {"key": key, "result": result})
    return result


def paired(runs, a, b, pooling):
    """The differences a − b of each seed both rows ran (STS avg, ``pooling``): the rows of one seed share
    the data's order and the start, so the seed moves both (the benchmark's unpaired rule, every seed of a
    above every seed of b, also asks a to clear that shared movement)."""
    score = {(r["variant"], r["seed"]): r["sts"][pooling]["avg"] for r in runs}
    seeds = sorted(s for (v, s) in score if v == a and (b, s) in score)
    return {s: score[(a, s)] - score[(b, s)] for s in seeds}


def judge(table, runs):
    """bench_quality.compare of each of COMPARISONS the table holds, with the differences paired by seed (in
    a's best pooling; the seeds as strings, as JSON keeps them)."""
    goals = {f"{a} vs {b}": bench_quality.compare(table[a], table[b], goal)
             for a, b, goal in COMPARISONS if a in table and b in table}
    for g in goals.values():
        g["paired_by_seed"] = {str(k): v for k, v in paired(runs, g["a"], g["b"], g["a_pooling"]).items()}
    return goals


def markdown(result, mark=MARK):
    """The generated table of the write-up: STS avg per row (mean ± std over seeds), its cost, the goals."""
    table, seeds = result["table"], result["settings"]["seeds"]
    lines = [f"<!-- {mark}: begin (written by benchmarks/studies/bench_beyond_clear_quality.py) -->",
             "Command: " + ", then ".join(f"`{c}`" for c in result["commands"]) + f" ({result['machine']['date']}, load average "
             f"{result['loadavg_before'][0]:.1f} before; {len(seeds)} seeds, {result['settings']['updates']} updates "
             f"of {result['settings']['batch_size']} sentences). STS avg: SimCSE protocol, 7 tasks, mean ± std over "
             "the seeds:", "",
             "| row | seeds | STS avg, [CLS] | STS avg, mean pooling | train s per run (under the machine's load) |",
             "|---|---|---|---|---|"]
    for name, row in table.items():
        lines.append(f"| {name} | {row['sts_mean']['n']} | {row['sts_cls']['mean']:.2f} ± {row['sts_cls']['std']:.2f} | "
                     f"{row['sts_mean']['mean']:.2f} ± {row['sts_mean']['std']:.2f} | "
                     f"{row['train_seconds']['mean']:.0f} |")
    lines += ["", "| comparison (best pooling of each) | difference | goal | outside the seeds' spread | met | "
              "paired by seed (a − b of each seed) |", "|---|---|---|---|---|---|"]
    for g in result["goals"].values():
        by_seed = g.get("paired_by_seed") or {}
        lines.append(f"| {g['a']} ({g['a_pooling']}) vs {g['b']} ({g['b_pooling']}) | {g['difference']:+.2f} | "
                     f"+{g['goal']:g} | {g['outside_spread']} | {'met' if g['met'] else 'not met'} | "
                     + (", ".join(f"{by_seed[k]:+.2f}" for k in sorted(by_seed, key=int)) if by_seed else "")
                     + (f" (every seed ≥ +{g['goal']:g}: {all(v >= g['goal'] for v in by_seed.values())})"
                        if by_seed else "") + " |")
    lines.append(f"<!-- {mark}: end -->")
    return "\n".join(lines)


def write_markdown(text, path=WRITEUP, mark=MARK):
    """Replace the block between ``mark``'s comments in ``path`` (or append it)."""
    old = path.read_text(encoding="utf-8")
    block = re.compile(rf"<!-- {re.escape(mark)}: begin.*?<!-- {re.escape(mark)}: end -->", re.S)
    new = block.sub(lambda _: text, old) if block.search(old) else old.rstrip() + "\n\n" + text + "\n"
    from fairseq_clear.atomic_files import atomic_write

    with atomic_write(str(path)) as f:
        f.write(new)


def plot(result, out_png):
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # its font search logs at DEBUG
    from plots import plt, save

    table = result["table"]
    names = list(table)
    fig, ax = plt.subplots(figsize=(9, 5))
    for i, n in enumerate(names):
        pooling, s = bench_quality.best_pooling(table[n])
        ax.bar(i, s["mean"], yerr=[[s["mean"] - s["min"]], [s["max"] - s["mean"]]], capsize=3, alpha=0.8,
               color="tab:blue" if table[n]["kind"] == "simcse" else "tab:orange")
        ax.scatter([i] * len(s["values"]), s["values"], s=10, color="black", zorder=3)
        ax.annotate(pooling, (i, s["min"]), textcoords="offset points", xytext=(0, -12), ha="center", fontsize=7)
    lo = min(bench_quality.best_pooling(table[n])[1]["min"] for n in names)
    ax.set_ylim(lo - 3, None)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("STS avg, SimCSE protocol (Spearman x 100)")
    ax.set_title(f"Issue 44's options, {result['settings']['updates']} updates: mean of "
                 f"{len(result['settings']['seeds'])} seeds (best pooling), whiskers min..max")
    ax.grid(axis="y", alpha=0.3)
    return save(fig, out_png)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--updates", type=int, default=UPDATES,
                   help="updates per run (default: %(default)s, the quality benchmark's; another number is a study "
                   "of its own: its own --out, and its own table in the write-up)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rows", help="';'-separated row names (default: all)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", help="default: benchmarks/results/beyond_clear_quality.json, or "
                   "beyond_clear_quality_N_updates.json for --updates N other than the default")
    p.add_argument("--no-writeup", action="store_true", help="do not rewrite 12_beyond_clear.md's table")
    p.add_argument("--study", default="", help="a study of its own: its own --out (beyond_clear_quality_STUDY.json) "
                   "and its own table in the write-up (e.g. rows run again beside their baseline)")
    p.add_argument("--from-mlm", type=int, default=0, metavar="N",
                   help="continued training: every SimCSE row starts from one encoder trained N updates by the "
                   "quality benchmark's MLM-only row (seed 1), as the papers start from BERT, at --continued-lr; "
                   "with the start's own score as a row (a study of its own: from_mlm_N)")
    p.add_argument("--continued-lr", default="1e-4",
                   help="the rows' learning rate with --from-mlm (default: %(default)s, a tenth of the from-scratch "
                   "rate the start was trained at; SimCSE continues BERT at 3e-5, which BERT was trained at 1e-4)")
    p.add_argument("--merge", action="store_true", help="keep the earlier full result's runs of other rows and "
                   "seeds (e.g. to add rows: --merge --rows NAME)")
    args = p.parse_args(argv)
    study = args.study or (f"from_mlm_{args.from_mlm}" if args.from_mlm else "")
    suffix = ("" if args.updates == UPDATES else f"_{args.updates}_updates") + (f"_{study}" if study else "")
    args.out = args.out or str(common.RESULTS / f"beyond_clear_quality{suffix}.json")
    started, commands = time.time(), []
    data = common.prepare_corpus(common.RUNS / "logs")
    syn = common.RUNS / "data" / "synonyms.json"  # bench_quality's table names it; no row here reads it
    rows = variants(syn, args.batch_size)
    # bench_quality.py's defaults (its --layers, --dim, ... ): the same scale as quality.json
    cfg = {"data": data, "batch_size": args.batch_size, "layers": 4, "dim": 128, "heads": 4, "lr": "1e-3",
           "warmup_share": 0.06, "temperature": "0.1", "contrastive_pooling": "mean", "keep_checkpoints": False,
           "senteval": False, "eval_every": 0}
    tag = ""
    if args.from_mlm:
        start = pretrained_start(cfg, args.from_mlm)
        rows = continued(rows, start)
        cfg = dict(cfg, lr=args.continued_lr, start={"checkpoint": str(start), "mlm_updates": args.from_mlm})
        tag = f".from_mlm{args.from_mlm}.lr{args.continued_lr}"
    names = [n for n in args.rows.split(";") if n] if args.rows else list(rows)
    unknown = [n for n in names if n not in rows]
    if unknown:
        p.error(f"--rows: unknown {unknown}; known: {list(rows)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    load_before = common.machine()["loadavg"]
    jobs = [(n, s) for s in seeds for n in names]
    print(f"{len(jobs)} runs of {args.updates} updates, {args.jobs} at a time", flush=True)
    results = common.run_parallel(
        [lambda n=n, s=s: run_once(cfg, n, rows[n], s, args.updates, tag) for n, s in jobs], args.jobs)
    failures = [f"{n} seed {s}: {r}" for (n, s), r in zip(jobs, results) if isinstance(r, Exception)]
    runs = [r for r in results if not isinstance(r, Exception)]
    earlier = common.RUNS / "results" / Path(args.out).name
    if args.merge and earlier.is_file():
        done = {(r["variant"], r["seed"]) for r in runs}
        before = common.read_json(earlier)
        commands = before.get("commands", [before["command"]])
        runs = [r for r in before["runs"] if (r["variant"], r["seed"]) not in done] + runs
        runs.sort(key=lambda r: (r["seed"], list(rows).index(r["variant"])))
        seeds = sorted({r["seed"] for r in runs})
    table = bench_quality.summarize(runs, {n: rows[n][0] for n in rows})
    goals = judge(table, runs)
    command = shlex.join(["python", "benchmarks/studies/bench_beyond_clear_quality.py"]
                         + (argv if argv is not None else sys.argv[1:]))
    result = {
        "command": command, "commands": commands + [command],
        "settings": {k: v for k, v in cfg.items() if k != "data"} | {
            "updates": args.updates, "seeds": seeds, "jobs": args.jobs, "threads_per_job": 1,
            "tokens_per_sample": common.TOKENS_PER_SAMPLE, "vocab": data["vocab_size"]},
        "variants": {n: {"kind": rows[n][0], "args": [str(a) for a in rows[n][1]]} for n in names},
        "table": table, "goals": goals, "runs": runs, "failures": failures,
        "seconds": round(time.time() - started, 1), "machine": common.machine(), "loadavg_before": load_before,
    }
    bench_quality.write_result(args.out, result)
    if table:
        plot(result, Path(args.out).with_suffix(".png"))
        mark = MARK + suffix.replace("_", "-")
        text = markdown(result, mark)
        print(text)
        if not args.no_writeup:
            write_markdown(text, mark=mark)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
