"""Quality at equal compute: a small-scale reproduction of CLEAR's claim (issue 6, part 3).

    python benchmarks/bench_quality.py [--quick]

From scratch, on the benchmark corpus (WikiText-103 valid + test + the first 150
train articles, see common.prepare_corpus), with the same model, seed(s), optimiser
settings and number of updates for every variant:

* MLM-only baselines: MLM only, Double-MLM (two maskings, two MLM losses), Double-batch
  (MLM only, twice the sentences per update) — the paper's §5.1;
* CLEAR: MLM + NT-Xent with del-word, del-span, subs+del-span, del-span+reorder;
* DeCLUTR (span pairs from the same document, ``--task declutr``) and SimCSE-unsup
  (dropout as the only noise, no MLM).

Each run is ``fairseq-train`` (through benchmarks/fairseq_train_timed.py, which
records the per-update losses), then ``clear-eval-sts`` ([CLS] and mean pooling,
the paper's Table 2 tasks) and a brief GLUE fine-tuning with
``examples/glue/finetune.sh`` (fairseq's sentence_prediction) on RTE, MRPC, STS-B
and SST-2 dev. Then *equal wall-clock*: MLM only again, with as many updates as fit
in the training time of the best CLEAR variant (``--stop-time-hours`` caps it).

Runs go ``--jobs`` at a time with one math thread each. Writes the summary that report.py
reads to benchmarks/results/quality.json (``--out``), the runs' training curves to
benchmarks/results/curves/quality.json, and the full result (every run's command, per-task
scores and per-update records) to benchmarks/runs/results/quality.json (not in git).
"""

import argparse
import math
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

GLUE_TASKS = ["RTE", "MRPC", "STS-B", "SST-2"]
GOAL_EQUAL_UPDATES = 10.0
GOAL_EQUAL_TIME = 5.7


def variants(syn):
    """name → (kind, extra fairseq-train args, batch multiplier)."""
    return {
        # reference: the untrained encoder (one update at a negligible learning rate)
        "Random init (no training)": ("init", ["--mlm-only"], 1),
        "MLM only": ("mlm", ["--mlm-only"], 1),
        "Double-MLM": ("mlm", ["--mlm-only", "--double-mlm"], 1),
        "Double-batch": ("mlm", ["--mlm-only"], 2),
        "MLM+del-word": ("clear", ["--augmentations", "del-word"], 1),
        "MLM+del-span": ("clear", ["--augmentations", "del-span"], 1),
        "MLM+subs+del-span": ("clear", ["--augmentations", "subs,del-span", "--synonym-table", syn], 1),
        "MLM+del-span+reorder": ("clear", ["--augmentations", "del-span,reorder"], 1),
        # the paper's pooling for the contrastive loss; the rows above pool by the mean
        "MLM+del-word [CLS]-trained": ("clear", ["--augmentations", "del-word", "--sentence-pooling", "cls"], 1),
        "DeCLUTR": ("declutr", [], 1),
        "SimCSE-unsup": ("simcse", ["--augmentations", "none", "--mlm", "off", "--loss-form", "simcse",
                                    "--temperature", "0.05", "--projection-layers", "1",
                                    "--projection-output-activation-fn", "tanh"], 1),
        # opt-in rows (--variants): the choices of issue 13, against the rows above
        "MLM+del-span+reorder blocks": ("clear", ["--augmentations", "del-span,reorder",
                                                  "--sample-break-mode", "complete"], 1),
        "MLM+del-span+reorder random batches": ("clear", ["--augmentations", "del-span,reorder",
                                                          "--batch-composition", "random"], 1),
        "MLM+del-span+reorder [CLS]-trained": ("clear", ["--augmentations", "del-span,reorder",
                                                         "--sentence-pooling", "cls"], 1),
        "SimCSE-unsup length batches": ("simcse", ["--augmentations", "none", "--mlm", "off", "--loss-form", "simcse",
                                                   "--temperature", "0.05", "--projection-layers", "1",
                                                   "--projection-output-activation-fn", "tanh",
                                                   "--batch-composition", "length"], 1),
    }


# extra rows beyond the issue's list, run on the first seed only to fit `make bench`'s hour
FIRST_SEED_ONLY = {"MLM+del-word [CLS]-trained"}
OPT_IN = {"MLM+del-span+reorder blocks", "MLM+del-span+reorder random batches",
          "MLM+del-span+reorder [CLS]-trained", "SimCSE-unsup length batches"}
QUICK_VARIANTS = ["Random init (no training)", "MLM only", "MLM+del-word", "SimCSE-unsup"]


def train_command(cfg, name, kind, extra, mult, seed, save_dir, max_update, total=None, stop_hours=None,
                  eval_every=0):
    data = cfg["data"]
    batch = cfg["batch_size"] * mult
    total = total or max_update
    args = [sys.executable, common.TIMED_TRAIN, "--bench-out", save_dir / "timed.json"]
    if kind == "declutr":
        # B/2 documents x 2 anchor spans = B anchors, as many as CLEAR's B sentences
        args += [data["documents_bin"], "--user-dir", common.USER_DIR, "--task", "declutr",
                 "--criterion", "clear", "--batch-size", max(1, batch // 2),
                 "--num-anchors", 2, "--num-positives", 2, "--min-span-length", 8,
                 "--max-span-length", common.TOKENS_PER_SAMPLE - 2,
                 "--sentence-pooling", "mean", "--projection-layers", 0, "--temperature", "0.05"]
    else:
        args += [data["sentences_bin"], "--user-dir", common.USER_DIR, "--task", "clear",
                 "--criterion", "clear", "--batch-size", batch, *extra]
    if kind == "clear":
        args += ["--temperature", cfg["temperature"]]
    if kind in ("clear", "simcse") and "--sentence-pooling" not in extra:
        args += ["--sentence-pooling", cfg["contrastive_pooling"]]
    args += [
        "--arch", "clear_roberta", "--encoder-layers", cfg["layers"], "--encoder-embed-dim", cfg["dim"],
        "--encoder-ffn-embed-dim", 4 * cfg["dim"], "--encoder-attention-heads", cfg["heads"],
        "--tokens-per-sample", common.TOKENS_PER_SAMPLE, "--max-positions", common.TOKENS_PER_SAMPLE,
        "--required-batch-size-multiple", 1,
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
        "--lr", cfg["lr"], "--lr-scheduler", "polynomial_decay",
        "--warmup-updates", max(1, round(cfg["warmup_share"] * total)), "--total-num-update", total,
        "--max-update", max_update, "--seed", seed, "--cpu", "--num-workers", 0,
        "--disable-validation", "--save-dir", save_dir, "--no-epoch-checkpoints",
        "--no-save-optimizer-state", "--log-format", "json", "--log-interval", 10,
    ]
    if stop_hours is not None:
        args += ["--stop-time-hours", f"{stop_hours:.6f}"]
    if eval_every:
        # fairseq's interval checkpoints (checkpoint_E_U.pt), scored and removed afterwards; an
        # interval that ends an epoch is saved only as the epoch's checkpoint (checkpointE.pt),
        # so those are kept too (DeCLUTR's epochs are short)
        args.remove("--no-epoch-checkpoints")
        args += ["--save-interval-updates", eval_every, "--keep-interval-updates", -1]
    return args


def eval_sts(cfg, ckpt, data_bin, out_json, log, senteval=True):
    """SimCSE's protocol (the table compared everywhere); with cfg['senteval'] also SentEval's."""
    cmd = [common.bin_path("clear-eval-sts"), "--checkpoint", ckpt, "--data", data_bin,
           "--sts-dir", common.STS_DIR, "--cpu", "--batch-size", 128, "--output", out_json]
    if senteval and cfg.get("senteval"):
        cmd += ["--protocol", "senteval"]
    common.run(cmd, log, threads=1)
    rep = common.read_json(out_json)
    out = {}
    for p, r in rep["results"].items():
        simcse = r.get("tables", {}).get("simcse", r["table"])
        out[p] = {"avg": simcse["Avg"], "table": simcse}
        if "senteval" in r.get("tables", {}):
            out[p]["senteval"] = r["tables"]["senteval"]
    return out


def prepare_glue(data, log_dir):
    out = common.RUNS / "glue-bin"
    todo = [t for t in GLUE_TASKS if not (out / f"{t}-bin" / "label").is_dir()]
    if not todo:
        return out
    common.run(["bash", common.REPO / "examples" / "glue" / "prepare.sh", common.GLUE_DIR,
                data["sentences_bin"], out, *todo], log_dir / "glue-prepare.log", threads=1,
               extra_env={"PYTHON": sys.executable, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    return out


def finetune(cfg, glue_bin, task, ckpt, seed, save_dir):
    updates = cfg["glue_updates"]
    e = {"CPU": 1, "MAX_EPOCH": 10,  # --max-update ends it (RTE: ~150 updates per epoch)
          "MAX_SENTENCES": cfg["glue_batch"], "DATA_BIN": glue_bin / f"{task}-bin",
         "SAVE_DIR": save_dir, "SEED": seed, "PYTHON": sys.executable,
         "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = ["bash", common.REPO / "examples" / "glue" / "finetune.sh", task, ckpt,
           "--max-update", updates, "--total-num-update", updates,
           "--warmup-updates", max(1, updates // 10), "--lr", cfg["glue_lr"], "--no-save"]
    common.run(cmd, save_dir / "finetune.log", threads=1, extra_env=e)
    summary = common.read_json(save_dir / "dev_metrics.json")
    return {"metric": summary["metric"], "score": summary["best"][summary["metric"]]}


def curves(timed):
    keys = ("mlm_loss", "cl_loss", "cl_acc", "loss")
    return {k: [r.get(k) for r in timed["records"]] for k in keys if any(k in r for r in timed["records"])}


def intermediate_checkpoints(save_dir, every):
    """(updates, path) of the checkpoints this run saved at multiples of ``every`` updates."""
    if not every:
        return []
    sys.path.insert(0, str(common.REPO))
    from fairseq_clear.checkpoint_safety import safe_load

    found = {}
    for p in save_dir.glob("checkpoint*.pt"):
        if p.name in ("checkpoint_last.pt", "checkpoint_best.pt"):
            continue
        updates = safe_load(str(p))["optimizer_history"][-1]["num_updates"]
        if updates % every == 0:
            found.setdefault(updates, p)
    return sorted(found.items())


def run_variant(cfg, name, spec, seed, glue_bin, max_update, tag="", total=None, stop_hours=None,
                do_glue=True):
    kind, extra, mult = spec
    slug = name.replace(" ", "_").replace("+", "_") + tag
    save_dir = common.RUNS / "quality" / f"{slug}.s{seed}"
    shutil.rmtree(save_dir, ignore_errors=True)
    save_dir.mkdir(parents=True)
    if kind == "init":
        cfg = dict(cfg, lr="1e-12")
        max_update = total = 1
    eval_every = cfg.get("eval_every", 0) if kind != "init" else 0
    cmd = train_command(cfg, name, kind, extra, mult, seed, save_dir, max_update, total, stop_hours,
                        eval_every)
    _, seconds, _ = common.run(cmd, save_dir / "train.log", threads=1)
    timed = common.read_json(save_dir / "timed.json")
    ckpt = save_dir / "checkpoint_last.pt"
    data_bin = cfg["data"]["sentences_bin"]
    sts = eval_sts(cfg, ckpt, data_bin, save_dir / "sts.json", save_dir / "sts.log")
    sts_curve = []
    for step, mid in intermediate_checkpoints(save_dir, eval_every):
        if step < len(timed["records"]):  # the last one equals checkpoint_last.pt, scored above
            got = eval_sts(cfg, mid, data_bin, save_dir / f"sts_{step}.json", save_dir / f"sts_{step}.log",
                           senteval=False)
            sts_curve.append({"updates": step, **{p: got[p]["avg"] for p in got}})
    if not cfg.get("keep_checkpoints"):
        for p in save_dir.glob("checkpoint*.pt"):
            if p.name != "checkpoint_last.pt":
                p.unlink()
    if eval_every:
        sts_curve.append({"updates": len(timed["records"]), **{p: sts[p]["avg"] for p in sts}})
    glue = {}
    if do_glue and glue_bin is not None:
        for task in GLUE_TASKS:
            glue[task] = finetune(cfg, glue_bin, task, ckpt, seed, save_dir / f"glue-{task}")
    if not cfg.get("keep_checkpoints"):
        ckpt.unlink(missing_ok=True)
    recs = timed["records"]
    last = recs[-10:]
    result = {
        "variant": name, "seed": seed, "tag": tag.strip("_") or "equal-updates",
        "command": " ".join(str(c) for c in cmd),
        "updates": len(recs),
        "train_seconds": round(timed["train_seconds"], 2),
        "process_seconds": round(seconds, 2),
        "sentences_per_update": recs[0]["sentences"] if recs else None,
        "final": {k: common.median([r.get(k) for r in last]) for k in ("mlm_loss", "cl_loss", "cl_acc")
                  if any(k in r for r in last)},
        "sts": sts,
        "glue": glue,
        "curves": curves(timed),
        "sts_curve": sts_curve,
    }
    print(f"  {name}{tag} seed {seed}: {len(recs)} updates in {timed['train_seconds']:.0f} s; STS avg "
          f"[CLS] {sts['cls']['avg']:.1f} mean {sts['mean']['avg']:.1f}"
          + ("; GLUE " + " ".join(f"{t} {g['score']:.1f}" for t, g in glue.items()) if glue else ""),
          flush=True)
    return result


#: the training curves kept in results/: the metrics plots.py draws, at most this many points per
#: run (a longer run keeps the means of consecutive blocks of updates), 4 significant digits
CURVE_METRICS = ("mlm_loss", "cl_loss", "cl_acc")
CURVE_POINTS = 400
CURVE_DIGITS = 4


def _significant(x, digits=CURVE_DIGITS):
    if not isinstance(x, float) or x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def curve_summary(run):
    """The per-update curves of ``run`` as results/curves/ keeps them: ``every`` updates per point
    (1 up to CURVE_POINTS updates), each point the mean of its block, rounded."""
    out = {"variant": run["variant"], "seed": run["seed"], "tag": run["tag"], "every": 1, "curves": {}}
    n = max((len(v) for v in run.get("curves", {}).values()), default=0)
    every = max(1, math.ceil(n / CURVE_POINTS))
    out["every"] = every
    for k in CURVE_METRICS:
        ys = run.get("curves", {}).get(k)
        if not ys:
            continue
        points = []
        for i in range(0, len(ys), every):
            block = [y for y in ys[i:i + every] if y is not None]
            points.append(_significant(sum(block) / len(block)) if block else None)
        out["curves"][k] = points
    return out


def summarize_result(result):
    """(summary, curves): what results/ keeps of a quality result (the full one, with every run's
    fairseq-train command, per-task scores and per-update curves, goes to benchmarks/runs/results/).

    The summary is everything report.py reads: the settings, the table (per-task scores as spreads
    over seeds), the goals; each run keeps its scores (STS averages, SentEval's, GLUE), final losses
    and STS curve. The curves (plots.py's training curves) go to their own file, curves_path(out).
    """
    summary = {k: v for k, v in result.items() if k != "runs"}
    runs = []
    for r in result["runs"]:
        slim = {k: v for k, v in r.items() if k not in ("command", "curves")}
        slim["sts"] = {p: {k: v for k, v in s.items() if k != "table"} for p, s in r["sts"].items()}
        runs.append(slim)
    summary["runs"] = runs
    curves = {"source": "quality runs' per-update training curves, from fairseq_train_timed.py's records",
              "metrics": list(CURVE_METRICS), "runs": [curve_summary(r) for r in result["runs"]]}
    return summary, curves


def write_result(out, result):
    """The full result to benchmarks/runs/results/, its summary and curves to ``out`` (results/)."""
    out = Path(out)
    common.write_json(common.RUNS / "results" / out.name, result)
    summary, curves = summarize_result(result)
    common.write_json(out, summary, compact=True)
    common.write_json(common.curves_path(out), curves, compact=True)


def spread(values):
    values = [v for v in values if v is not None]
    m, s = common.mean_std(values)
    return {"mean": m, "std": s, "min": min(values) if values else None,
            "max": max(values) if values else None, "n": len(values), "values": values}


def summarize(runs, kinds):
    by_variant = {}
    for r in runs:
        by_variant.setdefault((r["variant"], r["tag"]), []).append(r)
    table = {}
    for (name, tag), rs in by_variant.items():
        row = {"variant": name, "tag": tag, "kind": kinds.get(name), "seeds": [r["seed"] for r in rs],
               "updates": spread([r["updates"] for r in rs]),
               "train_seconds": spread([r["train_seconds"] for r in rs])}
        for pooling in ("cls", "mean"):
            row[f"sts_{pooling}"] = spread([r["sts"][pooling]["avg"] for r in rs])
            tasks = rs[0]["sts"][pooling]["table"].keys()
            row[f"sts_{pooling}_tasks"] = {t: spread([r["sts"][pooling]["table"][t] for r in rs]) for t in tasks}
            if all("senteval" in r["sts"][pooling] for r in rs):
                row[f"sts_{pooling}_senteval"] = spread([r["sts"][pooling]["senteval"]["Avg"] for r in rs])
                row[f"sts_{pooling}_senteval_tasks"] = {
                    t: spread([r["sts"][pooling]["senteval"][t] for r in rs]) for t in rs[0]["sts"][pooling]["senteval"]}
        glue_tasks = sorted({t for r in rs for t in r["glue"]})
        row["glue"] = {t: spread([r["glue"][t]["score"] for r in rs if t in r["glue"]]) for t in glue_tasks}
        if glue_tasks:
            per_seed = [sum(r["glue"][t]["score"] for t in glue_tasks) / len(glue_tasks)
                        for r in rs if all(t in r["glue"] for t in glue_tasks)]
            row["glue_avg"] = spread(per_seed)
        for k in ("mlm_loss", "cl_loss", "cl_acc"):
            vals = [r["final"].get(k) for r in rs if k in r["final"]]
            if vals:
                row[f"final_{k}"] = spread(vals)
        table[f"{name}{' (' + tag + ')' if tag != 'equal-updates' else ''}"] = row
    return table


def best_pooling(row):
    """(pooling, spread) with the higher mean STS average."""
    return max((("cls", row["sts_cls"]), ("mean", row["sts_mean"])), key=lambda x: x[1]["mean"])


def compare(a_row, b_row, goal):
    pa, sa = best_pooling(a_row)
    pb, sb = best_pooling(b_row)
    diff = sa["mean"] - sb["mean"]
    # a win must clear the seed spread: the worst seed of one above the best seed of the other;
    # with a single seed there is no spread to clear, so no win can be claimed
    outside = sa["min"] > sb["max"] if min(sa["n"], sb["n"]) >= 2 else None
    return {"a": a_row["variant"], "a_pooling": pa, "a_mean": sa["mean"], "a_min": sa["min"], "a_max": sa["max"],
            "b": b_row["variant"], "b_pooling": pb, "b_mean": sb["mean"], "b_min": sb["min"], "b_max": sb["max"],
            "difference": diff, "goal": goal, "outside_spread": outside,
            "met": bool(diff >= goal and outside), "seeds": min(sa["n"], sb["n"])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 variants, 1 seed, fewer updates, GLUE on 1 task")
    parser.add_argument("--variants", help="';'-separated variant names (default: all but the opt-in rows "
                        "of issue 13: blocks, random batches, [CLS]-trained del-span+reorder, SimCSE length batches)")
    parser.add_argument("--senteval", action="store_true",
                        help="also score STS by SentEval's protocol (clear-eval-sts --protocol senteval; "
                        "its regressor adds about a minute per run)")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per update (Double-batch: twice)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", default="1e-3")
    parser.add_argument("--warmup-share", type=float, default=0.06, help="warm-up updates / total")
    parser.add_argument("--temperature", default="0.1", help="τ of the CLEAR variants (DeCLUTR, SimCSE: 0.05)")
    parser.add_argument("--contrastive-pooling", choices=("cls", "mean"), default="mean",
                        help="pooling of the contrastive loss of the CLEAR and SimCSE variants (the paper: cls; "
                        "from scratch at this size [CLS] stays collapsed, see BENCHMARKS.md); one extra "
                        "variant always trains del-word on [CLS]")
    parser.add_argument("--glue-seeds", default="1", help="seeds whose models are fine-tuned on GLUE")
    parser.add_argument("--glue-updates", type=int, default=150)
    parser.add_argument("--glue-batch", type=int, default=16)
    parser.add_argument("--glue-lr", default="5e-4",
                        help="fine-tuning lr (RoBERTa's 1e-5..3e-5 suits base models; at 1e-4 this small model "
                        "stayed at the majority class in 200 updates)")
    parser.add_argument("--no-equal-time", action="store_true", help="skip the equal wall-clock runs")
    parser.add_argument("--eval-every", type=int, default=0,
                        help="also score STS (SimCSE protocol) every N updates, from fairseq's interval "
                        "checkpoints: the curve of the longer-horizon rows")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep-checkpoints", action="store_true")
    parser.add_argument("--out", default=str(common.RESULTS / "quality.json"))
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.updates, args.glue_updates = "1", min(args.updates, 100), min(args.glue_updates, 40)
    started = time.time()
    data = common.prepare_corpus(common.RUNS / "logs")
    syn = common.RUNS / "data" / "synonyms.json"
    if not syn.is_file():
        common.run([common.bin_path("clear-synonyms"), "counterfitted", common.SYNONYMS_JSON, syn])
    all_variants = variants(syn)
    names = [n for n in all_variants if n not in OPT_IN]
    if args.quick:
        names = QUICK_VARIANTS
    if args.variants:
        names = [n for n in args.variants.split(";") if n]
        unknown = [n for n in names if n not in all_variants]
        if unknown:
            parser.error(f"--variants: unknown {unknown}; known: {list(all_variants)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    glue_seeds = {int(s) for s in args.glue_seeds.split(",") if s}
    cfg = {"data": data, "batch_size": args.batch_size, "layers": args.layers, "dim": args.dim,
           "heads": args.heads, "lr": args.lr, "warmup_share": args.warmup_share,
           "temperature": args.temperature, "contrastive_pooling": args.contrastive_pooling,
           "glue_updates": args.glue_updates, "glue_batch": args.glue_batch,
           "glue_lr": args.glue_lr, "keep_checkpoints": args.keep_checkpoints, "senteval": args.senteval,
           "eval_every": args.eval_every}
    if args.quick:
        GLUE_TASKS[:] = ["RTE"]
    glue_bin = prepare_glue(data, common.RUNS / "logs") if glue_seeds else None
    load_before = os.getloadavg()
    others_before = common.other_jobs()

    # phase 1: every variant and seed, equal updates
    jobs = [(n, s) for s in seeds for n in names if s == seeds[0] or n not in FIRST_SEED_ONLY]
    print(f"phase 1: {len(jobs)} runs of {args.updates} updates, {args.jobs} at a time", flush=True)
    results = common.run_parallel(
        [lambda n=n, s=s: run_variant(cfg, n, all_variants[n], s, glue_bin, args.updates,
                                      do_glue=s in glue_seeds) for n, s in jobs],
        args.jobs)
    failures = [f"{n} seed {s}: {r}" for (n, s), r in zip(jobs, results) if isinstance(r, Exception)]
    runs = [r for r in results if not isinstance(r, Exception)]
    kinds = {n: all_variants[n][0] for n in all_variants}
    table = summarize(runs, kinds)

    # phase 2: MLM only at the wall-clock of the best contrastive variant
    equal_time = None
    clear_rows = [row for row in table.values() if row["kind"] == "clear" and row["tag"] == "equal-updates"]
    mlm_row = table.get("MLM only")
    if clear_rows and mlm_row and not args.no_equal_time:
        best = max(clear_rows, key=lambda row: best_pooling(row)[1]["mean"])
        t_clear = best["train_seconds"]["values"]
        t_mlm = mlm_row["train_seconds"]["values"]
        budget = common.median(t_clear)
        n_equal = int(args.updates * common.median(t_clear) / common.median(t_mlm))
        print(f"phase 2: MLM only for {budget:.0f} s (the median training time of {best['variant']}), "
              f"about {n_equal} updates", flush=True)
        results2 = common.run_parallel(
            [lambda s=s: run_variant(cfg, "MLM only", all_variants["MLM only"], s, glue_bin,
                                     max_update=n_equal, tag="_equal-time", total=n_equal,
                                     stop_hours=budget / 3600.0, do_glue=s in glue_seeds) for s in seeds],
            args.jobs)
        failures += [f"MLM only (equal time) seed {s}: {r}" for s, r in zip(seeds, results2) if isinstance(r, Exception)]
        runs2 = [r for r in results2 if not isinstance(r, Exception)]
        runs += runs2
        table = summarize(runs, kinds)
        eq_row = table.get("MLM only (equal-time)")
        if eq_row:
            equal_time = {"clear_variant": best["variant"], "time_budget_s": budget,
                          "clear_train_seconds": best["train_seconds"], "mlm_train_seconds": eq_row["train_seconds"],
                          "mlm_updates": eq_row["updates"], "comparison": compare(best, eq_row, GOAL_EQUAL_TIME)}

    goals = {}
    clear_rows = [row for row in table.values() if row["kind"] == "clear" and row["tag"] == "equal-updates"]
    mlm_rows = [row for row in table.values() if row["kind"] == "mlm" and row["tag"] == "equal-updates"]
    if clear_rows and mlm_row:
        best = max(clear_rows, key=lambda row: best_pooling(row)[1]["mean"])
        goals["equal_updates_vs_mlm_only"] = compare(best, table["MLM only"], GOAL_EQUAL_UPDATES)
        best_mlm = max(mlm_rows, key=lambda row: best_pooling(row)[1]["mean"])
        goals["equal_updates_vs_best_mlm_baseline"] = compare(best, best_mlm, GOAL_EQUAL_UPDATES)
        contrastive = [row for row in table.values() if row["kind"] in ("clear", "declutr", "simcse")
                       and row["tag"] == "equal-updates"]
        best_any = max(contrastive, key=lambda row: best_pooling(row)[1]["mean"])
        goals["equal_updates_best_contrastive_vs_mlm_only"] = compare(best_any, table["MLM only"], GOAL_EQUAL_UPDATES)
        init = table.get("Random init (no training)")
        if init:  # what pre-training adds over the untrained encoder at all
            goals["best_clear_vs_random_init"] = compare(best, init, 0.0)
            goals["mlm_only_vs_random_init"] = compare(table["MLM only"], init, 0.0)
    if equal_time:
        goals["equal_wall_clock_vs_mlm_only"] = equal_time["comparison"]

    result = {
        "command": shlex.join(["python", "benchmarks/bench_quality.py"] + sys.argv[1:]),
        "settings": {k: v for k, v in cfg.items() if k != "data"} | {
            "updates": args.updates, "seeds": seeds, "glue_seeds": sorted(glue_seeds), "glue_tasks": GLUE_TASKS,
            "jobs": args.jobs, "threads_per_job": 1, "tokens_per_sample": common.TOKENS_PER_SAMPLE,
            "vocab": data["vocab_size"], "train_sentences": data["sentences"]["train"],
            "train_documents": data["train_documents"]},
        "variants": {n: {"kind": all_variants[n][0], "args": [str(a) for a in all_variants[n][1]],
                         "batch_multiplier": all_variants[n][2]} for n in names},
        "table": table,
        "goals": goals,
        "equal_time": equal_time,
        "runs": runs,
        "failures": failures,
        "seconds": round(time.time() - started, 1),
        "machine": common.machine(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "other_jobs_before": others_before,
        "other_jobs_after": common.other_jobs(),
    }
    write_result(args.out, result)
    print(f"\n{'variant':34s} {'STS [CLS]':>16s} {'STS mean':>16s} {'GLUE avg':>10s} {'updates':>8s} {'train s':>8s}")
    for key, row in table.items():
        g = row.get("glue_avg")
        print(f"{key:34s} {row['sts_cls']['mean']:7.1f} ± {row['sts_cls']['std']:5.1f}  "
              f"{row['sts_mean']['mean']:7.1f} ± {row['sts_mean']['std']:5.1f}  "
              f"{(g['mean'] if g and g['n'] else float('nan')):9.1f} "
              f"{row['updates']['mean']:8.0f} {row['train_seconds']['mean']:8.0f}")
    for k, g in goals.items():
        print(f"{k}: {g['a']} ({g['a_pooling']}) {g['a_mean']:.1f} vs {g['b']} ({g['b_pooling']}) {g['b_mean']:.1f}: "
              f"{g['difference']:+.1f} (goal +{g['goal']}, outside the seed spread: {g['outside_spread']}) "
              f"-> {'met' if g['met'] else 'not met'}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
