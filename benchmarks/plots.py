"""PNG plots from benchmarks/results/*.json.

    python benchmarks/plots.py

* ``curves_{mlm_loss,cl_loss,cl_acc}.png``: the metric per update for every quality
  run (``curves/quality.json``; one line per run, colour per variant; a 10-update moving average);
* ``sts_avg.png``: STS average per variant, [CLS] and mean pooling, bar = mean over
  seeds, whiskers = the seeds' min..max, dots = the seeds;
* ``glue.png``: GLUE dev score per task and variant (mean over the fine-tuned seeds);
* ``horizon.png``: STS average against updates for the longer-horizon runs
  (``quality_horizon.json``), [CLS] dashed and mean pooling solid;
* ``speed_ratio.png``: update time of each ``--task clear`` configuration over fairseq's
  masked LM, next to its token floor and the goal (1.10 x floor);
* ``gradcache_memory.png``: peak memory against sentences per update, with and without
  ``--contrastive-chunk-size`` (``gradcache.json``) and for whole training steps at one
  padded length (``gradcache_full_step_block32.json``);
* ``memory_estimate.png``: the estimated GPU memory of the paper's recipes
  (``memory_estimate.json``) next to 40 and 80 GB cards, and the estimate against the
  measured CPU runs (``memory_estimate_validation.json``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METRIC_LABELS = {"mlm_loss": "MLM loss (bits)", "cl_loss": "contrastive loss (bits)",
                 "cl_acc": "contrastive accuracy (%)"}


def save(fig, path, palette=False):
    """Lay out, write and close ``fig``; returns ``path``.

    ``palette``: store the PNG with a 256-colour palette (the plots of many antialiased lines,
    which would be 110-210 KB in full colour; results/ keeps files under 100 KB).
    """
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    if palette:
        from PIL import Image

        with Image.open(path) as image:
            quantized = image.convert("RGB").quantize(256)
        quantized.save(path, optimize=True)
    return path


def moving_average(xs, window=10):
    out, acc, vals = [], 0.0, []
    for x in xs:
        vals.append(x)
        acc += x
        if len(vals) > window:
            acc -= vals.pop(0)
        out.append(acc / len(vals))
    return out


def colours(names):
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def plot_curves(curves, out_dir):
    """``curves``: bench_quality.py's curves file (per run: variant, tag, ``every`` updates per point)."""
    runs = curves["runs"]
    labels = []
    for r in runs:
        label = r["variant"] + ("" if r["tag"] == "equal-updates" else f" ({r['tag']})")
        if label not in labels:
            labels.append(label)
    colour = colours(labels)
    written = []
    for metric, ylabel in METRIC_LABELS.items():
        fig, ax = plt.subplots(figsize=(9, 5.5))
        seen = set()
        for r in runs:
            ys = r["curves"].get(metric)
            if not ys or all(y is None for y in ys):
                continue
            label = r["variant"] + ("" if r["tag"] == "equal-updates" else f" ({r['tag']})")
            every = r.get("every", 1)
            pts = [((i + 1) * every, y) for i, y in enumerate(ys) if y is not None]
            xs = [p[0] for p in pts]
            ax.plot(xs, moving_average([p[1] for p in pts]), color=colour[label], lw=1.2,
                    ls="--" if r["tag"] != "equal-updates" else "-", alpha=0.85,
                    label=None if label in seen else label)
            seen.add(label)
        if not seen:
            plt.close(fig)
            continue
        ax.set_xlabel("update")
        ax.set_ylabel(ylabel + ", 10-update moving average")
        ax.set_title(f"{METRIC_LABELS[metric]} per update, every quality run (one line per seed)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        written.append(save(fig, out_dir / f"curves_{metric}.png", palette=True))
    return written


def plot_sts(quality, out_dir):
    table = quality["table"]
    names = list(table)
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(names)), 5.5))
    width = 0.38
    for j, (pooling, label) in enumerate((("cls", "[CLS]"), ("mean", "mean"))):
        xs = [i + (j - 0.5) * width for i in range(len(names))]
        means = [table[n][f"sts_{pooling}"]["mean"] for n in names]
        lo = [table[n][f"sts_{pooling}"]["mean"] - table[n][f"sts_{pooling}"]["min"] for n in names]
        hi = [table[n][f"sts_{pooling}"]["max"] - table[n][f"sts_{pooling}"]["mean"] for n in names]
        ax.bar(xs, means, width, yerr=[lo, hi], capsize=3, label=f"{label} pooling", alpha=0.8)
        for x, n in zip(xs, names):
            vals = table[n][f"sts_{pooling}"]["values"]
            ax.scatter([x] * len(vals), vals, s=10, color="black", zorder=3)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("SentEval STS average (Spearman x 100)")
    seeds = quality["settings"]["seeds"]
    ax.set_title(f"STS average per variant: mean of {len(seeds)} seed(s), whiskers = min..max, dots = seeds")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    return [save(fig, out_dir / "sts_avg.png")]


def plot_glue(quality, out_dir):
    table = quality["table"]
    names = [n for n in table if table[n]["glue"]]
    if not names:
        return []
    tasks = sorted({t for n in names for t in table[n]["glue"]})
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(names)), 5))
    width = 0.8 / len(tasks)
    for j, t in enumerate(tasks):
        xs = [i + (j - (len(tasks) - 1) / 2) * width for i in range(len(names))]
        vals = [table[n]["glue"].get(t, {}).get("mean") or 0 for n in names]
        ax.bar(xs, vals, width, label=t, alpha=0.85)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("GLUE dev score")
    ax.set_title("GLUE dev after a brief CPU fine-tuning (mean over the fine-tuned seeds)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return [save(fig, out_dir / "glue.png")]


def plot_speed(speed, out_dir):
    res = {k: v for k, v in speed["results"].items() if k != "masked_lm"}
    names = list(res)
    fig, ax = plt.subplots(figsize=(max(8, 1.0 * len(names)), 5))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [res[n]["ratio_vs_masked_lm"] for n in names], 0.4,
           label="update time / fairseq masked_lm")
    ax.bar([x + 0.2 for x in xs], [res[n]["token_floor"] for n in names], 0.4,
           label="token floor (s + s~1 + s~2) / s", alpha=0.7)
    ax.scatter(list(xs), [speed_goal(speed) * res[n]["token_floor"] for n in names], marker="_", s=400,
               color="red", zorder=3, label=f"goal: {speed_goal(speed)} x floor")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ratio to fairseq masked_lm (same batches)")
    m = speed["model"]
    ax.set_title(f"Training cost per update, {m['layers']} layers x {m['embed_dim']}, "
                 f"{speed['batch_sentences']} sentences/update, 1 core")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return [save(fig, out_dir / "speed_ratio.png")]


def plot_horizon(h, out_dir):
    runs = [r for r in h["runs"] if r.get("sts_curve")]
    if not runs:
        return []
    colour = colours([r["variant"] for r in runs])
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for r in runs:
        xs = [p["updates"] for p in r["sts_curve"]]
        ax.plot(xs, [p["mean"] for p in r["sts_curve"]], "-o", color=colour[r["variant"]],
                label=f"{r['variant']} (mean)")
        ax.plot(xs, [p["cls"] for p in r["sts_curve"]], "--x", color=colour[r["variant"]],
                label=f"{r['variant']} ([CLS])")
    ax.set_xlabel("updates")
    ax.set_ylabel("STS average, Spearman x 100 (SimCSE protocol)")
    ax.set_title(f"STS along {h['settings']['updates']} updates, seed(s) {h['settings']['seeds']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return [save(fig, out_dir / "horizon.png", palette=True)]


def plot_gradcache(out_dir):
    panels = [(name, title, key) for name, title, key in (
        ("gradcache.json", "NT-Xent forward+backward, views of 32 tokens", "peak_mb"),
        ("gradcache_full_step_block32.json", "whole fairseq-train step (MLM + NT-Xent + Adam),\nrows of 32 tokens",
         "peak_rss_mb")) if (out_dir / name).is_file()]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (name, title, key) in zip(axes[0], panels):
        rows = [r for r in common.read_json(out_dir / name)["rows"] if key in r]
        for chunked, style, label in ((False, "-o", "without chunks"), (True, "-s", "with chunks")):
            pts = sorted((r["sentences"], r[key], r["chunk"]) for r in rows if (r["chunk"] != 0) == chunked)
            if pts:
                chunk = f" of {pts[0][2]}" if chunked else ""
                ax.plot([p[0] for p in pts], [p[1] / 1024 for p in pts], style, label=label + chunk)
        default = out_dir / name.replace(".json", "_glibc_default.json")
        if default.is_file():  # the same runs under glibc's growing mmap threshold (heap fragmentation)
            pts = sorted((r["sentences"], r[key]) for r in common.read_json(default)["rows"]
                         if key in r and r["chunk"] != 0)
            ax.plot([p[0] for p in pts], [p[1] / 1024 for p in pts], ":s", color="grey",
                    label="with chunks, glibc's default heap (RSS keeps freed blocks)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sentences per update")
        ax.set_ylabel("peak memory (GB)")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("GradCache: peak memory on this CPU, clear_roberta_small", fontsize=10)
    return [save(fig, out_dir / "gradcache_memory.png")]


def plot_memory_estimate(out_dir):
    if not (out_dir / "memory_estimate.json").is_file():
        return []
    est = common.read_json(out_dir / "memory_estimate.json")
    val = out_dir / "memory_estimate_validation.json"
    fig, axes = plt.subplots(1, 2 if val.is_file() else 1, figsize=(13, 4.8), squeeze=False,
                             gridspec_kw={"width_ratios": [2, 1]} if val.is_file() else None)
    ax = axes[0][0]
    rows = est["rows"][::-1]
    ys = range(len(rows))
    ax.barh(ys, [r["peak_mb"] / 1024 for r in rows], color="tab:blue", label="peak (one update)")
    ax.barh(ys, [r["static_mb"] / 1024 for r in rows], color="tab:grey", label="weights, gradients, Adam")
    for y, r in zip(ys, rows):
        ax.text(r["peak_mb"] / 1024 * 1.05, y, f"{r['peak_mb'] / 1024:.1f}", va="center", fontsize=8)
    for gb, style in ((40, ":"), (80, "--")):
        ax.axvline(gb, color="red", linestyle=style, label=f"{gb} GB card")
    ax.set_yticks(list(ys), [r["name"] for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(1, max(r["peak_mb"] for r in rows) / 1024 * 2.5)
    ax.set_xlabel("GiB (tensor memory; CUDA context not included)")
    r0 = rows[0]
    ax.set_title(f"estimated GPU memory: {r0['arch']}, {r0['tokens']}-token rows, {r0['precision']}, "
                 f"{r0['attention']} attention", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    if val.is_file():
        ax = axes[0][1]
        pts = common.read_json(val)["rows"]
        xs, ys2 = [p["peak_mb"] / 1024 for p in pts], [p["measured_rss_mb"] / 1024 for p in pts]
        ax.plot(xs, ys2, "o")
        top = max(xs + ys2) * 1.1
        ax.plot([0, top], [0, top], ":", color="grey", label="measured = estimate")
        ax.set_xlabel("estimate (GiB)")
        ax.set_ylabel("measured peak RSS (GiB)")
        ax.set_title(f"CPU check: {pts[0]['arch']},\n{pts[0]['tokens']}-token rows, fp32", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    return [save(fig, out_dir / "memory_estimate.png")]


def speed_goal(speed):
    return float(speed["goal"].split("<=")[1].split("x")[0])


def main():
    out_dir = common.RESULTS
    written = []
    curves = common.curves_path(out_dir / "quality.json")
    if curves.is_file():
        written += plot_curves(common.read_json(curves), out_dir)
    if (out_dir / "quality.json").is_file():
        q = common.read_json(out_dir / "quality.json")
        if q.get("runs"):
            written += plot_sts(q, out_dir) + plot_glue(q, out_dir)
    horizon = common.load_horizon()
    if horizon is not None:
        written += plot_horizon(horizon, out_dir)
    if (out_dir / "train_speed.json").is_file():
        written += plot_speed(common.read_json(out_dir / "train_speed.json"), out_dir)
    written += plot_gradcache(out_dir) + plot_memory_estimate(out_dir)
    for p in written:
        print(f"wrote {p}")


if __name__ == "__main__":
    main()
