"""Write BENCHMARKS.md from benchmarks/results/*.json (every number comes from those files).

    python benchmarks/report.py [--out BENCHMARKS.md] [--readme README.md]

``--readme`` also rewrites the README's block between the ``benchmarks:headline`` markers with
BENCHMARKS.md's headline (tests/unit/test_docs_generated.py fails when that block differs).
"""

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

R = common.RESULTS


def load(name):
    path = R / name
    return common.read_json(path) if path.is_file() else None


def f(x, nd=1, signed=False):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


def yes(flag):
    return "**met**" if flag else "**not met**"


def pm(s, nd=1):
    """mean ± std (min–max) of a spread dict."""
    if not s or s.get("n", 0) == 0:
        return "n/a"
    if s["n"] == 1:
        return f(s["mean"], nd)
    return f"{f(s['mean'], nd)} ± {f(s['std'], nd)} ({f(s['min'], nd)}–{f(s['max'], nd)})"


def machine_section(run_all, others):
    lines = ["## Machine and run", ""]
    if run_all is None:
        lines += ["No `benchmarks/results/run_all.json`: the sections below were run one by one.", ""]
        m = next((o["machine"] for o in others if "machine" in o), {})
    else:
        m = run_all["machine"]
        lines += [f"* command: `{run_all['command']}` (started {run_all['started']}, finished "
                  f"{run_all['finished']}, {f(run_all['seconds'] / 60)} minutes in all"
                  + ("; the sum of the sections' times, since some were re-run on their own: " + "; ".join(
                      f"{', '.join(r['sections'])} at {r['started']} (`{r['command']}`)" for r in run_all["reruns"])
                     if run_all.get("reruns") else "") + ")"]
    lines += [
        f"* CPU: {m.get('cpu_model', 'unknown')}, {m.get('cpus')} logical CPUs, "
        f"{m.get('memory_gb', 'n/a')} GB memory; {m.get('platform')}",
        f"* Python {m.get('python')}, torch {m.get('torch')}, fairseq {m.get('fairseq')}",
    ]
    if run_all is not None:
        lines.append(f"* load average (1, 5, 15 min) at the start {run_all['machine']['loadavg']}, at the end "
                     f"{run_all['loadavg_at_end']}")
        busy = run_all["other_jobs_at_start"] + run_all["other_jobs_at_end"]
        lines.append("* other training/test jobs seen on the machine: "
                     + ("none" if not busy else f"{len(busy)} (timings are noisy): " +
                        "; ".join(f"`{c[:100]}`" for c in busy[:6])))
        lines += ["", "| section | minutes | status | load before | load after |", "|---|---|---|---|---|"]
        for name, s in run_all["sections"].items():
            lines.append(f"| {name} | {f(s['seconds'] / 60)} | {'ok' if s['status'] == 0 else 'FAILED'} | "
                         f"{s['loadavg_before'][0]} | {s['loadavg_after'][0]} |")
        quick = load("run_all_quick.json")
        if quick and not run_all.get("quick"):
            lines.append(f"\n`make bench-quick` (`{quick['command']}`, {quick['started']}): "
                         f"{f(quick['seconds'] / 60)} minutes, load average at the start "
                         f"{quick['machine']['loadavg']}; its results are overwritten by the full run's.")
    lines.append("")
    return lines


def speed_section(speed, augment):
    lines = ["## 1. Training cost: `--task clear` against fairseq's masked LM", ""]
    if speed is None:
        return lines + ["Not run.", ""]
    m = speed["model"]
    lines += [
        f"`{speed['command']}`. Real `fairseq-train` runs (through `benchmarks/fairseq_train_timed.py`, which "
        f"times every `Trainer.train_step`), {m['layers']} layers x {m['embed_dim']} (FFN {m['ffn_dim']}, "
        f"{m['heads']} heads), vocabulary {m['vocab']}, {speed['batch_sentences']} sentences per update, "
        f"pinned to CPU {speed['pinned_cpu']} with {speed['threads']} thread; {speed['rounds']} alternating "
        f"round(s) of {speed['timed_updates']} timed updates after {speed['warmup_updates']} warm-up updates. "
        "Both tasks read the same binarized sentences and cut the same batches, in the same order, from "
        "the sentences sorted by length: update k holds sentences of the same lengths in both runs (checked "
        "on every timed batch), so the MLM half of a CLEAR update has the shape of fairseq's update. *ratio* = sum over the timed updates of the median (over rounds) update time, "
        "over masked_lm's; *floor* = (tokens in s + s~1 + s~2) / tokens in s on the same batches; "
        "*padded* counts padding too. Goal: ratio <= 1.10 x floor.",
        "",
        "| configuration | median update (s) | ratio | CPU-time ratio | token floor | padded floor | ratio / floor "
        "| goal | waiting for data | peak RSS (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in speed["results"].items():
        goal = "" if s["meets_goal"] is None else ("met" if s["meets_goal"] else "**not met**")
        same = "" if s.get("same_batch_shapes_as_masked_lm") else " (batch shapes differ!)"
        lines.append(
            f"| {name}{same} | {f(s['median_update_s'], 3)} | {f(s['ratio_vs_masked_lm'], 3)} | "
            f"{f(s['cpu_ratio_vs_masked_lm'], 3)} | {f(s['token_floor'], 3)} | {f(s['padded_floor'], 3)} | "
            f"{f(s['ratio_over_floor'], 3)} | {goal} | {f(100 * s['data_wait_share'], 1)}% | "
            f"{f(s['peak_rss_mb'], 0)} |")
    rated = [s for n, s in speed["results"].items() if s["meets_goal"] is not None and n != "clear --mlm-only"]
    met = sum(1 for s in rated if s["meets_goal"])
    worst = max(rated, key=lambda s: s["ratio_over_floor"]) if rated else None
    lines += ["", f"Goal (ratio <= 1.10 x floor) met by {met} of {len(rated)} augmentation configurations"
              + (f"; the highest ratio / floor is {f(worst['ratio_over_floor'], 3)}." if worst else "."),
              "", "![throughput ratios](benchmarks/results/speed_ratio.png)", ""]
    lines += ["## 2. Data pipeline", ""]
    if augment is not None:
        lines += [
            f"`{augment['command']}`: {augment['sentences']} WikiText training sentences (mean "
            f"{augment['mean_sentence_tokens']} tokens), one CPU ({augment['pinned_cpus']}), best of "
            f"{augment['repeats']} passes. *function*: the pure augmentation `f(body, rng)`; *dataset view*: "
            "what the data loader pays per view (re-keying Philox by (seed, epoch, index, view), the "
            "function, `<s>`/`</s>`, the tensor). Goal: >= 50,000 sentences/s for each augmentation alone.",
            "",
            "| augmentation | function (sentences/s) | µs | dataset view (sentences/s) | µs | view tokens | goal |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, s in augment["results"].items():
            goal = "" if s["meets_goal"] is None else ("met" if s["meets_goal"] else "**not met**")
            lines.append(f"| {name} | {s['function_sentences_per_s']:,} | {s['function_us_per_sentence']} | "
                         f"{s['view_sentences_per_s']:,} | {s['view_us_per_sentence']} | {s['mean_view_tokens']} | "
                         f"{goal} |")
        lines.append("")
    if speed is not None:
        waits = {n: s["data_wait_share"] for n, s in speed["results"].items()}
        top = max(waits, key=waits.get)
        lines += [f"Share of an update's wall time spent between `train_step` calls (waiting for the batch, "
                  f"with fairseq's prefetch thread on the same core, `--num-workers 0`): at most "
                  f"{f(100 * waits[top], 1)}% ({top}); per configuration in the table of section 1.", ""]
    return lines


def ranges_word(g, spread_words):
    if g["outside_spread"] is False and g["seeds"] >= 2 and g["a_max"] < g["b_min"]:
        return "do not overlap (a loss)"
    return spread_words[g["outside_spread"]]


def quality_section(q):
    lines = ["## 3. Quality at equal compute (small-scale reproduction of Tables 2 and 3)", ""]
    if q is None:
        return lines + ["Not run.", ""]
    s = q["settings"]
    cls_row = q["table"].get("MLM+del-word [CLS]-trained")
    lines += [
        f"`{q['command']}`. From scratch on {s['train_sentences']} WikiText sentences "
        f"({s['train_documents']} documents for DeCLUTR), clear_roberta {s['layers']} layers x {s['dim']} "
        f"({s['heads']} heads), vocabulary {s['vocab']}, {s['batch_size']} sentences per update "
        f"(Double-batch: twice), {s['updates']} updates, Adam lr {s['lr']} with "
        f"{f(100 * s['warmup_share'], 0)}% warm-up and linear decay, the same for every variant; "
        f"τ = {s['temperature']} for CLEAR (0.05 for DeCLUTR and SimCSE, their papers' value); seeds "
        f"{s['seeds']}; {s['jobs']} runs at a time, 1 thread each. STS: `clear-eval-sts` (SentEval copy, "
        "Spearman x 100, average of SICK-R, STS-B, STS12–16). GLUE: `examples/glue/finetune.sh` (fairseq "
        f"sentence_prediction, CPU) for {s['glue_updates']} updates of {s['glue_batch']} examples at lr "
        f"{s['glue_lr']}, dev score of seed(s) {s['glue_seeds']} on {', '.join(s['glue_tasks'])}. "
        "Cells: mean ± std (min–max) over seeds.",
        "",
        f"Pooling: the CLEAR and SimCSE rows compute the contrastive loss on **{s['contrastive_pooling']}**-pooled "
        "vectors (DeCLUTR always pools by the mean); the paper pools [CLS]. Trained from scratch at this size, "
        "[CLS] starts out collapsed (see *Why [CLS] pooling stalls* below); the row *MLM+del-word [CLS]-trained* "
        "keeps the paper's pooling to show what that costs"
        + (f": its final contrastive accuracy is {pm(cls_row['final_cl_acc'])}% against a chance level of "
           f"{f(100.0 / (2 * s['batch_size'] - 1), 2)}%" if cls_row and cls_row.get("final_cl_acc") else "")
        + ". Both poolings are evaluated for every model.",
        "",
    ]
    glue_tasks = s["glue_tasks"]
    head = "| variant | STS avg [CLS] | STS avg mean | " + " | ".join(glue_tasks) + " | GLUE avg | final cl_acc % | updates | train s |"
    lines += [head, "|" + "---|" * (8 + len(glue_tasks))]
    for key, row in q["table"].items():
        glue = " | ".join(pm(row["glue"].get(t)) for t in glue_tasks)
        lines.append(f"| {key} | {pm(row['sts_cls'])} | {pm(row['sts_mean'])} | {glue} | "
                     f"{pm(row.get('glue_avg'))} | {pm(row.get('final_cl_acc'))} | {f(row['updates']['mean'], 0)} | "
                     f"{f(row['train_seconds']['mean'], 0)} |")
    lines += ["", "Per-task STS ([CLS] / mean pooling, mean over seeds):", ""]
    first = next(iter(q["table"].values()))
    tasks = [t for t in first["sts_cls_tasks"] if t != "Avg"]
    lines += ["| variant | " + " | ".join(tasks) + " |", "|" + "---|" * (1 + len(tasks))]
    for key, row in q["table"].items():
        cells = [f"{f(row['sts_cls_tasks'][t]['mean'])} / {f(row['sts_mean_tasks'][t]['mean'])}" for t in tasks]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    lines += ["", "### Goals", ""]
    names = {
        "equal_updates_vs_mlm_only": "equal updates: best CLEAR variant vs MLM only (goal >= +10)",
        "equal_updates_vs_best_mlm_baseline": "equal updates: best CLEAR variant vs the best MLM-only baseline "
                                              "(MLM only, Double-MLM, Double-batch) (goal >= +10)",
        "equal_updates_best_contrastive_vs_mlm_only": "for reference: at equal updates, the best contrastive model "
                                                      "of any kind (CLEAR, DeCLUTR, SimCSE) vs MLM only",
        "equal_wall_clock_vs_mlm_only": "equal wall-clock: best CLEAR variant vs MLM only trained for as long "
                                        "(goal >= +5.7)",
        "best_clear_vs_random_init": "for reference: best CLEAR variant vs the untrained encoder",
        "mlm_only_vs_random_init": "for reference: MLM only vs the untrained encoder",
    }
    spread_words = {True: "do not overlap", False: "overlap (not a win)", None: "n/a (one seed: no win can be claimed)"}
    for k, label in names.items():
        g = q["goals"].get(k)
        if not g:
            continue
        line = (f"* {label}: {g['a']} ({g['a_pooling']}) {f(g['a_mean'])} [{f(g['a_min'])}–{f(g['a_max'])}] vs "
                f"{g['b']} ({g['b_pooling']}) {f(g['b_mean'])} [{f(g['b_min'])}–{f(g['b_max'])}]: "
                f"{f(g['difference'], 1, True)} points; seed ranges {ranges_word(g, spread_words)}")
        lines.append(line + ("" if label.startswith("for reference") else f" -> {yes(g['met'])}"))
    et = q.get("equal_time")
    if et:
        lines.append(f"* equal wall-clock runs: MLM only trained {pm(et['mlm_updates'], 0)} updates in "
                     f"{pm(et['mlm_train_seconds'], 0)} s against {et['clear_variant']}'s "
                     f"{pm(et['clear_train_seconds'], 0)} s (budget: its median, "
                     f"{f(et['time_budget_s'], 0)} s).")
    if q.get("failures"):
        lines += ["", "Failed runs: " + "; ".join(q["failures"])]
    notes = q.get("notes") or []
    if notes:
        lines += ["", "### Notes", ""] + [f"* {n}" for n in notes]
    lines += ["", "![STS average per variant](benchmarks/results/sts_avg.png)", "",
              "![GLUE dev](benchmarks/results/glue.png)", "",
              "Training curves (every run, 10-update moving average):", "",
              "![MLM loss](benchmarks/results/curves_mlm_loss.png)", "",
              "![contrastive loss](benchmarks/results/curves_cl_loss.png)", "",
              "![contrastive accuracy](benchmarks/results/curves_cl_acc.png)", ""]
    return lines


def collapse_section(c, q):
    lines = ["### Why [CLS] pooling stalls at this size", ""]
    if c is None:
        return lines + ["Not run (`python benchmarks/bench_cls_collapse.py`).", ""]
    cos = c["init_mean_cosine"]
    lines += [
        f"`{c['command']}`: {c['model']}; chance accuracy {f(c['chance_accuracy'], 2)}%. At initialisation "
        "the [CLS] vectors of different sentences are almost identical (mean pairwise cosine "
        + ", ".join(f"{f(v['cls'], 5)} at width {d}" for d, v in cos.items())
        + "; mean pooling: " + ", ".join(f"{f(v['mean'], 3)}" for v in cos.values())
        + "), so the contrastive loss has next to no signal to follow through [CLS].",
        "",
        "| setting | updates | accuracy, first 25 updates (%) | last 25 updates (%) | first update whose "
        "10-update mean exceeds 3x chance |",
        "|---|---|---|---|---|",
    ]
    for r in c["settings"]:
        lines.append(f"| {r['name']} | {r['updates']} | {f(r['first_25_mean'], 2)} | {f(r['last_25_mean'], 2)} | "
                     f"{r['first_update_10_update_mean_above_3x_chance'] or 'never'} |")
    if q is not None:
        rows = {k: v for k, v in q["table"].items() if "final_cl_acc" in v and v["tag"] == "equal-updates"}
        if rows:
            lines += ["", "Final contrastive accuracy (median of the last 10 updates, mean over seeds) of the "
                      "quality runs, which train MLM and NT-Xent together: "
                      + "; ".join(f"{k} {pm(v['final_cl_acc'])}%" for k, v in rows.items()) + "."]
    lines.append("")
    return lines


def scaling_section(sc):
    lines = ["## 4. Scaling: 1 rank against 2 ranks (gloo, CPU)", ""]
    if sc is None:
        return lines + ["Not run.", ""]
    eq = sc["equivalence"]
    lines += [
        f"`{sc['command']}`; {sc['model']}, global batch {sc['global_batch']} sentences (2 ranks x "
        f"{sc['per_rank_batch']}), dropout 0, first epoch unshuffled, so both runs train on the same sentences "
        "in every update.",
        "",
        "| update | loss, 1 rank | loss, 2 ranks (negatives gathered) | abs. difference | loss, 2 ranks, local negatives "
        "| negatives per anchor: gathered / local |",
        "|---|---|---|---|---|---|",
    ]
    for r in eq["updates"]:
        lines.append(f"| {r['update']} | {r['loss_1rank']:.7f} | {r['loss_2ranks']:.7f} | {r['loss_abs_diff']:.1e} | "
                     f"{r.get('loss_2ranks_local', float('nan')):.7f} | {r['negatives_per_anchor_gathered']} / "
                     f"{r['negatives_per_anchor_local']} |")
    lines += ["", f"Largest difference over loss, mlm_loss and cl_loss: {eq['max_abs_loss_difference']:.1e} "
              f"(tolerance {eq['tolerance']}) -> {yes(eq['met'])}.", "",
              "| layout (global batch the same) | sentences/s | median update (s) | speed-up |", "|---|---|---|---|"]
    for name, t in sc["throughput"].items():
        lines.append(f"| {name} | {f(t['sentences_per_s'])} | {f(t['median_update_s'], 3)} | "
                     f"{f(t['speedup_vs_1_rank_1_thread'], 2)} |")
    lines.append("")
    return lines


def binarizers_lines(b):
    """clear-prepare --binarizer direct against --binarizer fairseq (bench_preprocess.py)."""
    if not b:
        return []
    lines = [f"* `{b['command']}` ({b['corpus']}; {b['cpus']} CPUs, load average {b['loadavg_before'][0]:.1f} -> "
             f"{b['loadavg_after'][0]:.1f}): clear-prepare end to end with `--binarizer direct` against "
             "`--binarizer fairseq` (fairseq's binarizer on the text of pieces); the corpus-sized steps are "
             "sentences, carve, encode and binarize (Punkt's and sentencepiece's samples are bounded: a fixed cost).",
             "", "| binarizer | workers | MB | seconds | MB/s end to end | MB/s per worker, corpus-sized steps | "
             "encode + binarize (s) | peak memory (MB) |", "|---|---|---|---|---|---|---|---|"]
    large = b["memory"].get("large")
    for r in b["runs"] + [b["memory"]["run"]] + ([large["run"]] if large else []):
        st = r["steps_seconds"]
        lines.append(f"| {r['binarizer']} | {r['workers']} | {f(r['mb'])} | {f(r['seconds'])} | {f(r['mb_per_s'], 3)} | "
                     f"{f(r['corpus_steps_mb_per_s_per_worker'], 3)} | {f(st['encode-train'] + st['binarize'], 2)} | "
                     f"{f(r['peak_pss_mb_process_tree'], 0)} |")
    ws = sorted(b["ratio_direct_over_fairseq_end_to_end"])
    scaling = next((v for k, v in b.items() if k.startswith("scaling_")), None) if len(ws) > 1 else None
    est = b["estimate"]["hours"]
    lines += ["",
              "  Direct over fairseq: end to end " + ", ".join(
                  f"{f(b['ratio_direct_over_fairseq_end_to_end'][w], 2)}x at {w} worker(s)" for w in ws)
              + " (goal >= 10x); corpus-sized steps " + ", ".join(
                  f"{f(b['ratio_direct_over_fairseq_corpus_steps'][w], 2)}x" for w in ws)
              + "; encode + binarize steps " + ", ".join(f"{f(b['ratio_encode_and_binarize_steps'][w], 1)}x" for w in ws)
              + f". Byte-identical train/valid .bin: {b['byte_identical_train_and_valid']}. "
              + (f"{ws[-1]} over {ws[0]} worker(s): direct {f(scaling['direct']['corpus_steps'], 2)}x, fairseq "
                 f"{f(scaling['fairseq']['corpus_steps'], 2)}x (corpus-sized steps; goal >= 1.8x). " if scaling else "")
              + (f"Peak memory at {b['memory']['scale']}x the corpus over 1x (direct): "
                 f"{f(b['memory']['growth_peak'], 2)} (goal <= 1.1)"
                 + (f"; at {large['scale']}x: {f(large['growth_peak'], 2)}" if large else "") + "."
                 if b["memory"]["scale"] > 1 else "The direct path's memory: its runs' peaks in the table.")]
    # the end-to-end ratio's ceiling: with every step both paths share (Punkt, sentences, carve, the
    # tokenizer, dict) free, encode + binarize is left; 10x needs the shared steps S to satisfy
    # (S + F) / (S + D) >= 10, i.e. S <= (F - 10 D) / 9 (negative: out of reach even with them free)
    runs = {(r["binarizer"], str(r["workers"])): r for r in b["runs"]}  # ws: the JSON's string keys
    ids = {k: r["steps_seconds"]["encode-train"] + r["steps_seconds"]["binarize"] for k, r in runs.items()}
    lines.append("  Ceiling of the end-to-end ratio, if every step the two paths share took no time (encode + "
                 "binarize left): " + ", ".join(f"{f(ids[('fairseq', w)] / ids[('direct', w)], 2)}x at {w} worker(s)"
                                                for w in ws)
                 + ". The shared steps took " + ", ".join(
                     f"{f(runs[('direct', w)]['seconds'] - ids[('direct', w)], 1)} s" for w in ws)
                 + " of the direct runs; 10x allows them at most " + ", ".join(
                     f"{f((ids[('fairseq', w)] - 10 * ids[('direct', w)]) / 9, 1)} s" for w in ws)
                 + " (below zero: out of reach even if they took none).")
    ceiling = b.get("machine_scaling")
    if ceiling:  # runs before it was measured have none
        secs, n = ceiling["seconds"], str(ceiling["workers"])
        rounds = sorted(a / b for a, b in zip(*(ceiling["all_seconds"][k] for k in ("1", n)))) \
            if "all_seconds" in ceiling else []
        lines.append(f"  The machine's own speed-up for the encoder's work in {n} processes that pass nothing between "
                     f"them (no merging, no writing; the blocks of the 1-worker run's sentences dealt out; the median of "
                     f"{ceiling.get('repeats', 3)} rounds' ratios): {f(ceiling['speedup'], 2)}x (median {f(secs['1'], 3)} s "
                     f"in one process, {f(secs[n], 3)} s in {n}"
                     + (f"; the rounds from {f(rounds[0], 2)}x to {f(rounds[-1], 2)}x" if rounds else "")
                     + "): what the host gave two processes during the run, the yardstick for the scaling above.")
    best = [r for r in b["runs"] if r.get("best_of")]
    if best:
        lines.append("  The direct runs are each the best of " + ", ".join(sorted({str(r["best_of"]["runs"]) for r in best}))
                     + " (wall time; all of them: " + "; ".join(
                         f"{r['workers']} worker(s) " + ", ".join(f"{f(x, 2)} s" for x in r["best_of"]["seconds"])
                         for r in best) + ").")
    enc = b.get("encoder_over_sentencepiece")
    if enc:  # runs before it was measured have none
        lines.append(f"  The direct encoder's worker (encode, split, count, map, pack) on {f(enc['mb'], 1)} MB of the "
                     f"1-worker run's sentences took {f(enc['ratio'], 2)}x sentencepiece's own batch encoding of the "
                     f"same blocks ({f(enc['seconds']['encoder'], 3)} s against {f(enc['seconds']['sentencepiece'], 3)} "
                     "s, one thread, best of 3): what Python adds to the tokenizer.")
    lines += [
              "  Hours for the paper's corpus (" + b["estimate"]["assumes"] + "): direct " + ", ".join(
                  f"{k} {f(v)} h" for k, v in est["direct"].items()) + "; fairseq path " + ", ".join(
                  f"{k} {f(v)} h" for k, v in est["fairseq"].items()) + "."]
    return lines


#: bench_embed.py --runtimes: the rows, in the order of the table, and their names there
RUNTIMES = {
    "sentence_transformers_torch_fp32": "sentence-transformers, torch fp32 (all-MiniLM-L6-v2)",
    "hub_embed": "the hub's embed() (the model imported by clear-import-hf)",
    "onnx_fp32": "onnxruntime, onnx/model.onnx (fp32, as exported)",
    "onnx_int8": "onnxruntime, onnx/model_qint8_avx512_vnni.onnx (dynamic int8, per-channel)",
    "onnx_int8_per_tensor": "  variant: int8 with per-tensor weights",
    "onnx_int8_unsorted_batches": "  variant: int8, batches in input order (no length bucketing)",
    "onnx_fp32_fused": "  variant: fp32 with onnxruntime's transformer fusions",
    "onnx_int8_fused": "  variant: int8 of the fused graph",
}


def runtimes_lines(rt):
    """The runtimes an export serves on (bench_embed.py --runtimes)."""
    if not rt:
        return []
    speed, ratio, sts = rt["sentences_per_second"], rt["ratio_vs_sentence_transformers"], rt["sts_b_dev_spearman"]
    m = rt["machine"]
    lines = [f"* `{rt['command']}`: the runtimes an export serves on, {rt['sentences']} STS-B dev sentences "
             f"(timed on {rt['timed_sentences']}, {rt['repeats']} passes, ratios within a pass), {rt['threads']} "
             f"threads, batches of {rt['batch_size']}, {m['cpu_count']} CPUs, load average "
             f"{m['load_average_before'][0]:.1f} -> {m['load_average_after'][0]:.1f} (a shared machine: speeds "
             f"are noisy), onnxruntime {m['onnxruntime']}.", "",
             "| runtime | sentences/s | x sentence-transformers torch fp32 (wall) | (CPU time) | STS-B dev Spearman |",
             "|---|---|---|---|---|"]
    cpu = rt.get("ratio_vs_sentence_transformers_cpu_time", {})
    for key, name in RUNTIMES.items():
        if key in speed:
            lines.append(f"| {name} | {f(speed[key])} | {f(ratio[key], 2)} | {f(cpu.get(key), 2)} | {f(sts[key], 2)} |")
    vq = rt.get("sts_b_dev_spearman_quantized_vectors")
    if vq:
        lines += ["", "  Quantized vectors (sentence-transformers' fp32 vectors through fairseq_clear.quantization, "
                  "int8 ranges calibrated on these sentences; int8 scored by the cosine of the dequantized vectors, "
                  "binary by the agreement of the sign bits), STS-B dev Spearman: "
                  + ", ".join(f"{k} {f(v, 2)}" for k, v in vq.items()) + "."]
    goal = rt["goals"]
    best = max((k for k in speed if k.startswith("onnx_int8")), key=lambda k: ratio[k])
    loss = sts["sentence_transformers_torch_fp32"] - sts[best]
    met = ratio[best] >= goal["onnx_int8_vs_sentence_transformers"] and loss <= goal["sts_loss_points"]
    lines += ["", f"  Goal: ONNX int8 >= {goal['onnx_int8_vs_sentence_transformers']}x sentence-transformers' "
              f"torch fp32 with STS-B dev within {goal['sts_loss_points']} point: best int8 row "
              f"{f(ratio[best], 2)}x, {f(loss, 2)} point(s) below -> {yes(met)}.", ""]
    return lines


#: benchmarks/studies/serving_runtimes.py: its runs, in the order of the table, and their names there
SERVING = {
    "torch": "sentence-transformers, torch",
    "onnx_fp32": "sentence-transformers backend=\"onnx\", onnx/model.onnx",
    "onnx_int8": "sentence-transformers backend=\"onnx\", onnx/model_qint8_avx512_vnni.onnx",
    "openvino": "sentence-transformers backend=\"openvino\" (converts the torch weights)",
    "openvino_f32_hint": "  the same, INFERENCE_PRECISION_HINT f32",
    "openvino_runtime_on_onnx_fp32": "OpenVINO's runtime on onnx/model.onnx (f32 hint)",
}


def serving_lines(sv):
    """The exports loaded by the runtimes that cannot be installed beside ours (a side venv)."""
    if not sv:
        return []
    v = sv["versions"]["check (side venv)"]
    names = ", ".join(f"{k} {v[k]}" for k in ("sentence-transformers", "transformers", "optimum-onnx",
                                               "optimum-intel", "openvino", "onnxruntime") if k in v)
    lines = [f"* `{sv['command']}` (after its `--export` part in the checkout's venv; a side venv with {names}): "
             f"the exports against the hub's embed() on {sv['sentences']} STS-B dev sentences, {sv['threads']} thread. "
             "Exports: " + "; ".join(f"{k}, {v}" for k, v in sv["models"].items()) + ". TEI (a Rust server with "
             "no PyPI, npm or Debian package): not run.", "",
             "| export | runtime | max abs difference to the hub | lowest cosine | STS-B dev Spearman |",
             "|---|---|---|---|---|"]
    for model, runs in sv["results"].items():
        lines.append(f"| {model} | the hub's embed() | | | {f(runs['hub_embed']['sts_b_dev_spearman'], 2)} |")
        for key, name in SERVING.items():
            r = runs.get(key)
            if r is None:
                continue
            if "error" in r:
                lines.append(f"| {model} | {name} | failed: {r['error'][:80]} | | |")
            else:
                lines.append(f"| {model} | {name} | {r['max_abs_difference_vs_hub']:.1e} | "
                             f"{f(r['min_cosine_vs_hub'], 5)} | {f(r['sts_b_dev_spearman'], 2)} |")
    met = sv["goals_met"]
    lines += ["", f"  Goals: backend=\"onnx\" fp32 within {sv['goals']['fp32_max_abs_difference']:g} of the hub "
              f"{yes(met['fp32_equal_to_hub'])}; the int8 file within {sv['goals']['int8_sts_loss_points']} point "
              f"of fp32's STS-B dev (minilm) {yes(met['int8_sts_within'])}.", ""]
    return lines


def others_section(pre, emb):
    lines = ["## 5. Other benchmarks (preprocessing, embedding)", ""]
    if pre is not None:
        lines.append(f"* `{pre['command']}`: see `benchmarks/results/bench_preprocess.json`. Sentences/s per stage:")
        for stage, by_w in pre["stages"].items():
            key = "sentences_per_s_without_startup" if stage == "binarizing" else "sentences_per_s"
            cells = ", ".join(f"{w} worker(s) {v[key]:,}" for w, v in by_w.items() if isinstance(v, dict) and key in v)
            lines.append(f"  * {stage}: {cells}")
        lines += binarizers_lines(pre.get("binarizers"))
    large = load("bench_preprocess_1gb.json")
    if large is not None:  # the same comparison on the corpus size, 2 workers (about half an hour)
        lines += binarizers_lines(large.get("binarizers"))
    if emb is not None:
        r = emb["sentences_per_second"]
        lines.append(f"* `{emb['command']}`: embed() {f(r['embed'])} sentences/s, sentence-transformers "
                     f"{f(r['sentence_transformers'])}, per-sentence loop {f(r['extract_features_loop'])}; "
                     f"ratios {f(emb['ratio_vs_sentence_transformers'], 2)}x (goal >= "
                     f"{emb['goals']['vs_sentence_transformers']}x) and {f(emb['ratio_vs_loop'], 1)}x (goal >= "
                     f"{emb['goals']['vs_loop']}x).")
    lines += runtimes_lines(load("bench_embed_runtimes.json"))
    lines += serving_lines(load("serving_runtimes.json"))
    if pre is None and emb is None:
        lines.append("Not run.")
    lines.append("")
    return lines


def headline(speed, q, sc, augment=None, emb=None):
    lines = ["## Headline", ""]
    if speed is not None:
        rs = {n: s for n, s in speed["results"].items() if n.startswith("clear ") and n != "clear --mlm-only"}
        cells = ", ".join(f"{n[6:]} {f(s['ratio_vs_masked_lm'], 2)}x (floor {f(s['token_floor'], 2)})"
                          for n, s in rs.items())
        lines.append(f"* Cost per update against fairseq masked_lm on the same batches: {cells}.")
    if q is not None:
        for k in ("equal_updates_vs_mlm_only", "equal_wall_clock_vs_mlm_only"):
            g = q["goals"].get(k)
            if g:
                lines.append(f"* {'Equal updates' if 'updates' in k else 'Equal wall-clock'}: {g['a']} "
                             f"({g['a_pooling']}) {f(g['a_mean'])} vs {g['b']} ({g['b_pooling']}) {f(g['b_mean'])} STS avg, "
                             f"{f(g['difference'], 1, True)} (goal +{g['goal']}) -> {yes(g['met'])}.")
        g = q["goals"].get("equal_updates_vs_best_mlm_baseline")
        if g:
            lines.append(f"* Equal updates, against the best of the paper's MLM baselines: {g['b']} ({g['b_pooling']}) "
                         f"{f(g['b_mean'])}, {f(g['difference'], 1, True)} (goal +{g['goal']}) -> {yes(g['met'])}.")
        g = q["goals"].get("best_clear_vs_random_init")
        if g:
            lines.append(f"* For reference, the untrained encoder scores {f(g['b_mean'])} ({g['b_pooling']}): "
                         f"{g['a']} is {f(g['difference'], 1, True)} from it, MLM only "
                         f"{f(q['goals']['mlm_only_vs_random_init']['difference'], 1, True)}. At this size and "
                         "number of updates MLM pulls the sentence vectors away from a surprisingly good "
                         "starting point, and the contrastive term mostly keeps them there (see section 3).")
    if augment is not None:
        alone = {n: r for n, r in augment["results"].items() if r.get("meets_goal") is not None}
        lines.append("* Each augmentation alone on one core (sentences/s, function / full dataset view): " + ", ".join(
            f"{n} {r['function_sentences_per_s']:,} / {r['view_sentences_per_s']:,}" for n, r in alone.items())
            + f" (goal >= {augment['goal_sentences_per_s']:,}; the view adds the per-sample re-keying and tensor).")
    if emb is not None:
        r = emb["results"][emb["pooling"]]
        lines.append(f"* embed() ({emb['pooling']}): {f(r['ratio_vs_sentence_transformers'], 2)}x sentence-transformers' "
                     f"encode() (goal >= {emb['goals']['vs_sentence_transformers']}x), "
                     f"{f(r['ratio_vs_loop'], 1)}x a per-sentence loop (goal >= {emb['goals']['vs_loop']}x"
                     + (f"; not reachable here: the loop already runs at 1/{f(r['loop_ratio_ceiling'], 1)} of this "
                        "CPU's matmul peak" if "loop_ratio_ceiling" in r else "") + ").")
    if sc is not None:
        lines.append(f"* 2 ranks reproduce 1 rank's losses within {sc['equivalence']['max_abs_loss_difference']:.1e}.")
    lines.append("")
    return lines


#: (label, row, against) pairs of the choices section: what each choice does, same seeds
CHOICES = [
    ("blocks of 64 tokens vs sentences (CLEAR del-span+reorder)", "MLM+del-span+reorder blocks",
     "MLM+del-span+reorder"),
    ("random vs length batches (CLEAR del-span+reorder)", "MLM+del-span+reorder random batches",
     "MLM+del-span+reorder"),
    ("length vs random batches (SimCSE-unsup)", "SimCSE-unsup length batches", "SimCSE-unsup"),
]


def choices_section(c):
    """Sentence vs block samples, length vs random batches, under both STS protocols (quality_samples_batches.json)."""
    lines = ["## 3b. The choices the paper leaves open: samples and batches, both STS protocols", ""]
    if c is None:
        return lines + ["Not run (`python benchmarks/bench_quality.py --variants ... --senteval "
                        "--out benchmarks/results/quality_samples_batches.json`).", ""]
    s, t = c["settings"], c["table"]
    lines += [
        f"`{c['command']}`: the setting of section 3 ({s['updates']} updates of {s['batch_size']} samples, "
        f"seeds {s['seeds']}), no GLUE. STS average over SICK-R, STS-B and STS12–16, Spearman x 100, mean ± std "
        "(min–max) over seeds, under SimCSE's protocol (all pairs pooled, zero-shot cosine; the table of "
        "section 3) and SentEval's (STS12–16 as the weighted mean of subsets, STS-B and SICK-R by SentEval's "
        "regressor on the frozen vectors: CLEAR's Table 2 protocol).",
        "",
        "| variant | SimCSE protocol, [CLS] | SimCSE protocol, mean | SentEval protocol, [CLS] | SentEval protocol, mean |",
        "|---|---|---|---|---|",
    ]
    for key, row in t.items():
        lines.append(f"| {key} | {pm(row['sts_cls'])} | {pm(row['sts_mean'])} | {pm(row.get('sts_cls_senteval'))} | "
                     f"{pm(row.get('sts_mean_senteval'))} |")
    lines += ["", "| choice | pooling | difference (SimCSE protocol) | outside the seed spread? |", "|---|---|---|---|"]
    for label, a, b in CHOICES:
        if a not in t or b not in t:
            continue
        for pooling in ("cls", "mean"):
            sa, sb = t[a][f"sts_{pooling}"], t[b][f"sts_{pooling}"]
            outside = ("yes" if sa["min"] > sb["max"] or sa["max"] < sb["min"] else "no") if min(sa["n"], sb["n"]) > 1 \
                else "one seed"
            lines.append(f"| {label} | {'[CLS]' if pooling == 'cls' else 'mean'} | "
                         f"{f(sa['mean'] - sb['mean'], 1, signed=True)} | {outside} |")
    return lines + ["", "Defaults (`--batch-composition auto`, each paper's trainer): length batches for CLEAR, "
                    "random for SimCSE, DeCLUTR and pairs; `--sample-break-mode eos` sentences for sentence "
                    "embeddings, `complete` blocks of 512 tokens in the paper recipe.", ""]


def horizon_section(h, q):
    """Where each curve goes: 10x the updates of section 3, STS scored along the way (quality_horizon.json)."""
    lines = ["## 3c. A longer horizon: 10x the updates", ""]
    if h is None:
        return lines + ["Not run (`python benchmarks/bench_quality.py --updates 2000 --eval-every 400 --variants "
                        "... --seeds 1 --senteval --out benchmarks/results/quality_horizon.json`).", ""]
    s, t = h["settings"], h["table"]
    steps = sorted({p["updates"] for r in h["runs"] for p in r["sts_curve"]})
    short = {r["variant"]: r for r in (q or {}).get("runs", []) if r["seed"] in s["seeds"] and r["tag"] == "equal-updates"}
    lines += [
        f"`{h['command']}`" + "".join(f" and `{c}` (replacing that variant's run)" for c in h.get("more_commands", []))
        + f": the model, data and optimiser of section 3, {s['updates']} updates "
        f"({f(100 * s['warmup_share'], 0)}% warm-up, linear decay over all {s['updates']}), seed(s) {s['seeds']}, "
        f"STS scored every {s['eval_every']} updates from fairseq's interval checkpoints (SimCSE protocol; "
        "the last point under both protocols). One seed: section 3's seed spread (about ±1–3 points) is the "
        "yardstick for differences. The 200-update column is section 3's run of the same seed, trained with a "
        "200-update schedule.",
        "",
        "| variant | 200 updates (section 3), [CLS] / mean | " + " | ".join(
            f"{u}, [CLS] / mean" for u in steps) + " | SentEval protocol at the end, [CLS] / mean | train s |",
        "|" + "---|" * (4 + len(steps)),
    ]
    for r in h["runs"]:
        row = t[r["variant"]]
        s3 = short.get(r["variant"])
        first = f"{f(s3['sts']['cls']['avg'])} / {f(s3['sts']['mean']['avg'])}" if s3 else "—"
        at = {p["updates"]: p for p in r["sts_curve"]}
        cells = [f"{f(at[u]['cls'])} / {f(at[u]['mean'])}" if u in at else "—" for u in steps]
        se = (f"{f(row['sts_cls_senteval']['mean'])} / {f(row['sts_mean_senteval']['mean'])}"
              if row.get("sts_cls_senteval") else "—")
        lines.append(f"| {r['variant']} | {first} | " + " | ".join(cells) +
                     f" | {se} | {f(row['train_seconds']['mean'], 0)} |")
    lines += ["", "From the first to the last scored point (SimCSE protocol):", ""]
    for r in h["runs"]:
        c = r["sts_curve"]
        if len(c) > 1:
            a, b = c[0], c[-1]
            lines.append(f"* {r['variant']}: mean {f(a['mean'])} → {f(b['mean'])} ({f(b['mean'] - a['mean'], 1, True)}), "
                         f"[CLS] {f(a['cls'])} → {f(b['cls'])} ({f(b['cls'] - a['cls'], 1, True)}) from update "
                         f"{a['updates']} to {b['updates']}")
    runs = {r["variant"]: r for r in h["runs"]}
    cls_run, mean_run = runs.get("MLM+del-span+reorder [CLS]-trained"), runs.get("MLM+del-span+reorder")
    if cls_run and mean_run and cls_run["sts_curve"] and mean_run["sts_curve"]:
        x, y = cls_run["sts_curve"][-1]["cls"], mean_run["sts_curve"][-1]["cls"]
        lines.append(f"* Does the paper's [CLS] pooling catch up? The [CLS]-trained model's [CLS] vector ends at "
                     f"{f(x)}, the mean-trained model's [CLS] vector at {f(y)} and its mean vector at "
                     f"{f(mean_run['sts_curve'][-1]['mean'])}: " + ("yes" if x >= y else "not within these updates"))
    lines += ["", "![STS along the longer horizon](benchmarks/results/horizon.png)", ""]
    notes = h.get("notes") or []
    if notes:
        lines += [f"* {n}" for n in notes] + [""]
    return lines


README_START = "<!-- benchmarks:headline:start -->"
README_END = "<!-- benchmarks:headline:end -->"


def readme_headline() -> str:
    """The README's benchmark block: BENCHMARKS.md's headline bullets, between the markers."""
    speed, augment, q = load("train_speed.json"), load("augment.json"), load("quality.json")
    sc, emb = load("scaling.json"), load("bench_embed.json")
    bullets = [line for line in headline(speed, q, sc, augment, emb)[2:] if line]
    note = ("<!-- generated by `python benchmarks/report.py --readme README.md` from "
            "benchmarks/results/*.json: do not edit by hand -->")
    return "\n".join([README_START, note, "", *bullets, "", README_END])


def update_readme(path) -> bool:
    """Replace the block between the markers in ``path``; True when the file changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"error: {path} has no {README_START} ... {README_END} block")
    new = text[:start] + readme_headline() + text[end + len(README_END):]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(common.REPO / "BENCHMARKS.md"))
    parser.add_argument("--readme", help="also rewrite this README's benchmarks:headline block")
    args = parser.parse_args()
    run_all = load("run_all.json") or load("run_all_quick.json")
    speed, augment, q = load("train_speed.json"), load("augment.json"), load("quality.json")
    sc, pre, emb = load("scaling.json"), load("bench_preprocess.json"), load("bench_embed.json")
    others = [x for x in (speed, augment, q, sc) if x is not None]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `benchmarks/report.py` from `benchmarks/results/*.json`, written by `make bench` "
        "(`python benchmarks/run_all.py`); every number below comes from those files. Re-run `make bench` "
        "(about an hour on 2 CPU cores) or `make bench-quick` (under 10 minutes, smaller) to reproduce them. "
        "The shared data in `../shared/data` (WikiText, SentEval STS, GLUE, the counter-fitted synonyms) is "
        "read, never copied. Sections from 5b on are the write-ups of one-off studies (benchmarks run outside "
        "`make bench`), kept next to their scripts in `benchmarks/studies/`; each names the command that "
        "printed its numbers.",
        "",
    ]
    lines += headline(speed, q, sc, augment, emb)
    lines += machine_section(run_all, others)
    lines += speed_section(speed, augment)
    lines += quality_section(q)
    lines += collapse_section(load("cls_collapse.json"), q)
    lines += choices_section(load("quality_samples_batches.json"))
    lines += horizon_section(common.load_horizon(), q)
    lines += scaling_section(sc)
    lines += others_section(pre, emb)
    # benchmarks run outside `make bench` (long, GPU or one-off measurements): hand-written
    # write-ups next to their scripts in studies/, each naming the command that printed its numbers
    # and its JSON
    for section in sorted((Path(__file__).resolve().parent / "studies").glob("*.md")):
        lines += ["", section.read_text(encoding="utf-8").rstrip(), ""]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    if args.readme:
        print(f"{'updated' if update_readme(args.readme) else 'unchanged'}: {args.readme}")


if __name__ == "__main__":
    main()
