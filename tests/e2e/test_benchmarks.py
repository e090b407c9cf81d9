"""Smoke tests of the benchmark harness (benchmarks/) at tiny size; no timings are asserted."""

import argparse
import importlib
import json
import statistics
import sys

import pytest

from helpers import REPO, USER_DIR, make_binarized, run_cli, synthetic_sentences

BENCH = REPO / "benchmarks"
STUDIES = BENCH / "studies"  # one-off studies, outside `make bench`


def bench_module(name, monkeypatch, results=None):
    """Import benchmarks/NAME.py or benchmarks/studies/NAME.py (and a fresh common.py)."""
    if results is not None:
        monkeypatch.setenv("CLEAR_BENCH_RESULTS", str(results))
    monkeypatch.syspath_prepend(str(STUDIES))
    monkeypatch.syspath_prepend(str(BENCH))
    for mod in ("common", name):
        # a fresh import (common reads CLEAR_BENCH_RESULTS), and sys.modules as it was after the
        # test: a later test's `import common` must not get this one's results folder
        monkeypatch.setitem(sys.modules, mod, None)
        del sys.modules[mod]
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    return make_binarized(work, synthetic_sentences(400, seed=3), synthetic_sentences(40, seed=4))


def timed_run(data, out, *task_args, updates=4):
    args = [sys.executable, BENCH / "fairseq_train_timed.py", "--bench-out", out, data,
            "--arch", "roberta" if "masked_lm" in task_args else "clear_roberta",
            "--encoder-layers", "1", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
            "--encoder-attention-heads", "2", "--tokens-per-sample", "64", "--max-positions", "64",
            "--batch-size", "8", "--required-batch-size-multiple", "1", "--optimizer", "adam", "--lr", "1e-3",
            "--max-update", str(updates), "--cpu", "--num-workers", "0", "--seed", "1",
            "--disable-validation", "--no-save", "--log-format", "json", "--log-interval", "100", *task_args]
    run_cli(args)
    return json.loads(out.read_text())


def test_timed_train_sees_the_same_batch_shapes_as_masked_lm(data, tmp_path):
    """The speed benchmark's premise: masked_lm and --task clear cut batches of the same lengths, in order."""
    mlm = timed_run(data, tmp_path / "mlm.json", "--task", "masked_lm", "--criterion", "masked_lm",
                    "--sample-break-mode", "eos")
    clear = timed_run(data, tmp_path / "clear.json", "--user-dir", USER_DIR, "--task", "clear",
                      "--criterion", "clear", "--augmentations", "del-word")
    assert len(mlm["records"]) == len(clear["records"]) == 4
    for a, b in zip(mlm["records"], clear["records"]):
        assert a["s_tokens"] == b["s_tokens"] and a["s_padded"] == b["s_padded"]
        assert a["views_tokens"] == 0 and 0 < b["views_tokens"] <= b["views_padded"]
        assert b["views_rows"] == 2 * b["sentences"]
        assert a["mlm_loss"] > 0 and b["cl_loss"] > 0 and 0 <= b["cl_acc"] <= 100
        assert a["step_s"] > 0 and a["step_cpu_s"] >= 0
    assert mlm["peak_rss_mb"] > 0 and clear["train_seconds"] > 0


def test_speed_summary_ratio_and_floor(monkeypatch, tmp_path):
    speed = bench_module("bench_train_speed", monkeypatch, tmp_path)

    def run(step, s_tok, v_tok):
        recs = [{"step_s": step, "gap_s": 0.0, "step_cpu_s": step, "gap_cpu_s": 0.0, "s_tokens": s_tok,
                 "views_tokens": v_tok, "s_padded": s_tok, "views_padded": v_tok + 2, "sentences": 8,
                 "ids": [k]} for k in range(5)]
        return {"records": recs, "peak_rss_mb": 100.0}

    out = speed.summarize({"masked_lm": [run(1.0, 100, 0)], "clear del-word": [run(2.0, 100, 90), run(2.2, 100, 90)]},
                          warmup=1)
    dw = out["clear del-word"]
    assert dw["token_floor"] == pytest.approx(1.9)
    assert dw["ratio_vs_masked_lm"] == pytest.approx(2.1)  # median of 2.0 and 2.2
    assert dw["meets_goal"] is (2.1 <= 1.10 * 1.9)
    assert dw["same_batch_shapes_as_masked_lm"] and out["masked_lm"]["meets_goal"] is None


def test_quality_comparison_needs_the_spread(monkeypatch, tmp_path):
    quality = bench_module("bench_quality", monkeypatch, tmp_path)

    def row(name, cls, mean):
        return {"variant": name, "sts_cls": quality.spread(cls), "sts_mean": quality.spread(mean)}

    clear, mlm = row("CL", [50, 52, 54], [40, 41, 42]), row("MLM", [20, 21, 22], [39, 40, 41])
    g = quality.compare(clear, mlm, 10.0)
    assert g["a_pooling"] == "cls" and g["b_pooling"] == "mean"
    assert g["difference"] == pytest.approx(12.0) and g["outside_spread"] and g["met"]
    single = quality.compare(row("a", [60], [40]), row("b", [20], [30]), 10.0)
    assert single["outside_spread"] is None and not single["met"]
    close = row("MLM2", [20, 21, 22], [39, 40, 51])
    assert not quality.compare(clear, close, 10.0)["outside_spread"]


def test_report_and_plots_from_results(monkeypatch, tmp_path):
    """BENCHMARKS.md and the PNGs are generated from whatever results exist."""
    speed = {"command": "c", "model": {"layers": 1, "embed_dim": 32, "ffn_dim": 64, "heads": 2, "vocab": 10,
                                        "tokens_per_sample": 64},
             "batch_sentences": 8, "rounds": 1, "warmup_updates": 1, "timed_updates": 2, "pinned_cpu": 0,
             "threads": 1, "goal": "ratio <= 1.1 x token floor",
             "results": {n: {"median_update_s": 0.1, "ratio_vs_masked_lm": r, "cpu_ratio_vs_masked_lm": r,
                             "token_floor": fl, "padded_floor": fl, "ratio_over_floor": r / fl,
                             "meets_goal": None if n == "masked_lm" else r <= 1.1 * fl, "data_wait_share": 0.01,
                             "peak_rss_mb": 500, "same_batch_shapes_as_masked_lm": True}
                         for n, r, fl in (("masked_lm", 1.0, 1.0), ("clear del-word", 2.0, 1.9))}}
    (tmp_path / "train_speed.json").write_text(json.dumps(speed))
    curve = [{"updates": 400, "cls": 30.0, "mean": 41.25}, {"updates": 800, "cls": 31.0, "mean": 47.75}]
    spread = {"mean": 47.75, "std": 0.0, "min": 47.75, "max": 47.75, "n": 1, "values": [47.75]}
    horizon = {"command": "h", "settings": {"updates": 800, "warmup_share": 0.06, "seeds": [1], "eval_every": 400},
               "table": {"DeCLUTR": {"sts_cls_senteval": spread, "sts_mean_senteval": spread, "train_seconds": spread}},
               "runs": [{"variant": "DeCLUTR", "seed": 1, "tag": "equal-updates", "sts_curve": curve}]}
    (tmp_path / "quality_horizon.json").write_text(json.dumps(horizon))
    rerun = {"command": "h2", "table": {"SimCSE-unsup": {"train_seconds": spread}},
             "runs": [{"variant": "SimCSE-unsup", "seed": 1, "tag": "equal-updates", "sts_curve": curve}]}
    (tmp_path / "quality_horizon_simcse.json").write_text(json.dumps(rerun))
    plots = bench_module("plots", monkeypatch, tmp_path)
    plots.main()
    assert (tmp_path / "speed_ratio.png").stat().st_size > 0
    assert (tmp_path / "horizon.png").stat().st_size > 0
    report = bench_module("report", monkeypatch, tmp_path)
    out = tmp_path / "BENCHMARKS.md"
    monkeypatch.setattr(sys, "argv", ["report.py", "--out", str(out)])
    report.main()
    text = out.read_text()
    assert "clear del-word" in text and "| 2.000 |" in text and "Not run." in text
    assert "| DeCLUTR | — | 30.0 / 41.2 | 31.0 / 47.8 | 47.8 / 47.8 | 48 |" in text
    assert "| SimCSE-unsup | — | 30.0 / 41.2 | 31.0 / 47.8 | — | 48 |" in text and "`h2` (replacing" in text


def test_binarizer_lines_give_the_encoders_overhead_when_measured(monkeypatch, tmp_path):
    """BENCHMARKS §5: the encoder's time over sentencepiece's own, the machine's own speed-up for the
    encoder's work in 2 processes and the direct runs' best of N, from runs that measured them."""
    report = bench_module("report", monkeypatch, tmp_path)
    b = json.loads((BENCH / "results" / "bench_preprocess.json").read_text())["binarizers"]
    b.pop("encoder_over_sentencepiece", None)
    assert not any("sentencepiece's own batch" in line for line in report.binarizers_lines(b))
    b["encoder_over_sentencepiece"] = {"mb": 10.0, "seconds": {"encoder": 0.682, "sentencepiece": 0.498},
                                       "ratio": 1.37}
    (line,) = [line for line in report.binarizers_lines(b) if "sentencepiece's own batch" in line]
    assert "on 10.0 MB" in line and "took 1.37x" in line and "(0.682 s against 0.498 s" in line
    # the machine's own ceiling for the workers' scaling, and the direct runs' best of N, when measured
    b.pop("machine_scaling", None)
    for r in b["runs"]:
        r.pop("best_of", None)
    assert not any("machine's own" in line or "best of 2" in line for line in report.binarizers_lines(b))
    b["machine_scaling"] = {"workers": 2, "blocks": 10, "repeats": 3, "seconds": {"1": 3.2, "2": 1.778},
                            "all_seconds": {"1": [3.2, 3.0, 3.6], "2": [1.778, 2.0, 1.5]}, "speedup": 1.8}
    b["runs"][0]["best_of"] = {"runs": 2, "seconds": [30.81, 31.5], "corpus_steps_seconds": [19.48, 20.0]}
    (line,) = [line for line in report.binarizers_lines(b) if "machine's own" in line]
    assert "in 2 processes" in line and "median of 3 rounds' ratios): 1.80x (median 3.200 s in one process, 1.778 s in 2" in line
    assert "the rounds from 1.50x to 2.40x)" in line
    (line,) = [line for line in report.binarizers_lines(b) if "best of 2" in line]
    assert "30.81 s, 31.50 s" in line


#: results/ in git holds summaries (full logs go to the ignored benchmarks/runs/)
RESULTS_FILE_LIMIT = 100 * 1024


def test_results_in_git_are_summaries_named_for_what_they_hold():
    """No file under benchmarks/results/ over 100 KB; no name under benchmarks/ carries an issue number."""
    results = BENCH / "results"
    big = [f"{p.relative_to(REPO)} ({p.stat().st_size / 1024:.0f} KB)" for p in sorted(results.rglob("*"))
           if p.is_file() and p.stat().st_size > RESULTS_FILE_LIMIT]
    assert not big, f"over {RESULTS_FILE_LIMIT // 1024} KB (keep a summary in results/, the rest in runs/): {big}"
    local = {"runs", "__pycache__"}  # benchmarks/runs/ is ignored by git: the full logs of local runs
    named = [str(p.relative_to(REPO)) for p in sorted(BENCH.rglob("*"))
             if "issue" in p.name.lower() and not local & set(p.relative_to(BENCH).parts)]
    assert not named, f"name it for what it holds, not for an issue: {named}"


def test_quality_result_is_written_as_a_summary(monkeypatch, tmp_path):
    """bench_quality.write_result: the full result to runs/results/, the summary report.py reads to
    --out, the plotted curves (rounded, at most CURVE_POINTS points a run) to curves/."""
    monkeypatch.setenv("CLEAR_BENCH_RUNS", str(tmp_path / "runs"))
    quality = bench_module("bench_quality", monkeypatch, tmp_path / "results")
    sts = {"avg": 50.0, "table": {"STS12": 40.0}, "senteval": {"Avg": 45.0}}
    run = {"variant": "MLM only", "seed": 1, "tag": "equal-updates", "command": "fairseq-train ...", "updates": 1000,
           "sts": {"cls": sts, "mean": sts}, "glue": {}, "final": {"mlm_loss": 10.0},
           "curves": {"mlm_loss": [None] + [10.123456789] * 999, "loss": [1.0] * 1000},
           "sts_curve": [{"updates": 1000, "cls": 50.0, "mean": 50.0}]}
    result = {"command": "c", "table": {"MLM only": {"sts_cls": quality.spread([50.0])}}, "runs": [run]}
    out = tmp_path / "results" / "q.json"
    quality.write_result(out, result)
    assert json.loads((tmp_path / "runs" / "results" / "q.json").read_text()) == result
    summary = json.loads(out.read_text())
    assert summary["table"] == result["table"] and summary["command"] == "c"
    slim = summary["runs"][0]
    assert "command" not in slim and "curves" not in slim and slim["sts_curve"] == run["sts_curve"]
    assert slim["sts"]["cls"] == {"avg": 50.0, "senteval": {"Avg": 45.0}}
    curves = json.loads((tmp_path / "results" / "curves" / "q.json").read_text())["runs"][0]
    assert (curves["variant"], curves["every"], list(curves["curves"])) == ("MLM only", 3, ["mlm_loss"])
    assert len(curves["curves"]["mlm_loss"]) == 334 and set(curves["curves"]["mlm_loss"]) == {10.12}
    assert out.read_text().count("\n") < 40  # leaf containers on one line


@pytest.mark.bench_smoke
def test_gradcache_benchmark_runs_in_a_small_form(tmp_path):
    """benchmarks/studies/bench_gradcache.py keeps working (tiny model, tiny batch)."""
    from helpers import run_captured

    out = tmp_path / "gc.json"
    proc = run_captured([sys.executable, STUDIES / "bench_gradcache.py", "--sizes", "8", "--chunk", "4",
                         "--arch", "clear_roberta_tiny", "--out", out])
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert {(r["sentences"], r["chunk"]) for r in rows} == {(8, 0), (8, 4)}
    assert all(r["peak_mb"] >= 0 and r["seconds"] > 0 for r in rows)


@pytest.mark.bench_smoke
def test_negatives_benchmark_runs_in_a_small_form(tmp_path):
    """benchmarks/studies/bench_negatives.py keeps working (tiny model, tiny batch): every configuration
    timed, the masking ones masked something."""
    out = tmp_path / "neg.json"
    run_cli([sys.executable, STUDIES / "bench_negatives.py", "--sentences", "24", "--arch", "clear_roberta_tiny",
             "--repeats", "1", "--output", out])
    configs = json.loads(out.read_text())["configs"]
    assert set(configs) == {"base", "mask-duplicates", "matryoshka", "guide", "all"}
    assert configs["base"]["ratio_to_base"] == 1.0 and all(c["median_seconds"] > 0 for c in configs.values())
    assert configs["all"]["masked_last"]["dup_masked"] > 0 and configs["all"]["masked_last"]["guide_masked"] > 0


def _estimates(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    run_cli([sys.executable, STUDIES / "estimate_memory.py", "--arch", "clear_roberta_tiny", "--tokens", "20",
             "--vocab", "1000", "--precision", "fp32", "--attention", "math", "--out", out, *args])
    return {r["config"]: r for r in json.loads(out.read_text())["rows"]}


def _configs(*configs):
    return [a for c in configs for a in ("--config", c)]


def test_memory_estimate_on_fake_tensors_equals_the_real_update(tmp_path, monkeypatch):
    """benchmarks/studies/estimate_memory.py: the same update on fake and on real tensors allocates the
    same; the optimizer state is what fairseq keeps per parameter; GradCache's memory is flat."""
    configs = ["--batch-size 32", "--batch-size 32 --contrastive-chunk-size 8 --mlm-chunk-size 8",
               "--batch-size 8 --update-freq 4 --accumulate-contrastive",
               "--batch-size 128 --contrastive-chunk-size 8 --mlm-chunk-size 8"]
    fake = _estimates(tmp_path, "fake", *_configs(*configs))
    real = _estimates(tmp_path, "real", "--real", *_configs(*configs))
    for c in configs:
        assert fake[c]["fake_tensors"] and not real[c]["fake_tensors"]
        assert fake[c]["peak_mb"] == pytest.approx(real[c]["peak_mb"], rel=1e-3), c
        # fp32 Adam: the weights and two moments (gradients are freed by zero_grad)
        assert fake[c]["static_mb"] * 2**20 == pytest.approx(12 * fake[c]["parameters"], rel=0.01)
    unchunked, chunked, chunked4 = (fake[c]["peak_mb"] - fake[c]["static_mb"] for c in configs[:2] + configs[3:])
    assert unchunked > 2 * chunked and chunked4 < 1.1 * chunked
    # fp16: fp16 weights, fp32 master weights and their gradients, two fp32 moments
    half = _estimates(tmp_path, "half", "--precision", "fp16", *_configs(configs[1]))[configs[1]]
    assert half["static_mb"] * 2**20 == pytest.approx(18 * half["parameters"], rel=0.01)
    bad = run_cli([sys.executable, STUDIES / "estimate_memory.py", "--tokens", "4"], check=False)
    assert bad.returncode != 0 and "--tokens" in bad.stdout
    results = tmp_path / "results"
    results.mkdir()
    (results / "memory_estimate.json").write_text((tmp_path / "fake.json").read_text())
    bench_module("plots", monkeypatch, results).main()
    assert (results / "memory_estimate.png").stat().st_size > 0


def test_memory_estimate_matches_the_task_s_own_batches(data, tmp_path):
    """What the estimate assumes of a batch (the masked share, full rows) holds for the task's own
    batches (fairseq's masking, CLEAR's augmentations, the collater's padding): given the views'
    padded length it allocates what the real update does; by default it is an upper bound."""
    configs = ["--batch-size 16 --sample-break-mode none",
               "--batch-size 16 --sample-break-mode none --contrastive-chunk-size 4 --mlm-chunk-size 4"]
    real = _estimates(tmp_path, "real", "--data", data, "--real", *_configs(*configs))
    width = {r["view_tokens"] for r in real.values()}
    assert len(width) == 1 and width.pop() < 20  # del-word shortens the views
    fitted = _estimates(tmp_path, "fitted", "--data", data, "--view-tokens", str(real[configs[0]]["view_tokens"]),
                        *_configs(*configs))
    bound = _estimates(tmp_path, "bound", "--data", data, *_configs(*configs))
    for c in configs:
        work = {k: v[c]["peak_mb"] - v[c]["static_mb"] for k, v in (("real", real), ("fitted", fitted),
                                                                    ("bound", bound))}
        assert work["fitted"] == pytest.approx(work["real"], rel=0.01), (c, work)
        assert work["bound"] >= 0.99 * work["real"], (c, work)  # (less the real batch's padding masks)
    assert bound[configs[0]]["peak_mb"] > 1.1 * real[configs[0]]["peak_mb"]  # full-length views cost more
    bad = run_cli([sys.executable, STUDIES / "estimate_memory.py", "--data", tmp_path], check=False)
    assert bad.returncode != 0 and "dict.txt" in bad.stdout


def test_results_are_replaced_only_by_a_complete_file(monkeypatch, tmp_path):
    """common.write_json: a write that dies half-way (a full disk) leaves the earlier result whole."""
    common = bench_module("common", monkeypatch, tmp_path)
    out = tmp_path / "r.json"
    common.write_json(out, {"a": 1})
    real_write = type(out).write_text

    def half_then_full_disk(self, text, *a, **k):
        real_write(self, text[: len(text) // 2], *a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(out), "write_text", half_then_full_disk)
    with pytest.raises(OSError):
        common.write_json(out, {"a": 2, "b": list(range(100))})
    monkeypatch.undo()
    assert json.loads(out.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


@pytest.mark.bench_smoke
def test_gpu_benchmark_runs_in_a_small_form_on_cpu(data, tmp_path, monkeypatch):
    """benchmarks/studies/bench_gpu.py keeps working without a GPU (toy sizes) and says it ran on CPU."""
    sentences = tmp_path / "s.txt"
    sentences.write_text("\n".join(synthetic_sentences(50, seed=9)) + "\n", encoding="utf-8")
    out = tmp_path / "gpu.json"
    proc = run_cli([sys.executable, STUDIES / "bench_gpu.py", "--small", "--device", "cpu", "--data", data,
                    "--sentences", sentences, "--updates", "2", "--warmup", "1", "--batch-start", "4",
                    "--batch-max", "8", "--chunk", "4", "--embed-sentences", "50", "--precisions", "fp32,bf16",
                    "--num-workers", "1", "--out", out])
    assert "not GPU numbers" in proc.stdout
    result = json.loads(out.read_text())
    assert result["cuda"] is False and result["precisions"] == ["fp32", "bf16"] and "apex_importable" in result
    # the bf16 path that a GPU run takes (fairseq-train --bf16 for both tasks, autocast, bf16 encode)
    bf16 = next(r for r in result["train"] if r["precision"] == "bf16")
    assert bf16["time_ratio"] > 0 and bf16["s_tokens_clear"] == bf16["s_tokens_masked_lm"] > 0
    assert result["largest_contrastive_batch"]["bf16"]["4"]["largest_sentences"] == 8
    assert 0 < result["embed"]["bf16"]["max_abs_diff"] < 0.1
    row = result["train"][0]
    assert row["num_workers"] == 1 and [r["num_workers"] for r in result["train"]] == [1, 1]
    assert row["s_tokens_clear"] == row["s_tokens_masked_lm"] > 0  # the same blocks
    assert row["views_tokens_clear"] > 0 and row["token_floor"] > 1 and row["time_ratio"] > 0
    assert row["peak_device_mb_clear"] is None  # no device memory on CPU
    assert result["largest_contrastive_batch"]["fp32"]["4"] == {"largest_sentences": 8, "stopped_by": "cap"}
    assert result["embed"]["fp32"]["max_abs_diff"] < 1e-4 and result["embed"]["fp32"]["embed_sent_per_s"] > 0
    bad = run_cli([sys.executable, STUDIES / "bench_gpu.py", "--small", "--device", "cpu", "--data", data,
                   "--precisions", "fp16", "--out", out], check=False)
    assert bad.returncode != 0 and "--precisions" in bad.stdout
    gpu = bench_module("bench_gpu", monkeypatch, tmp_path)  # the options' checks, in this process
    for workers, message in (("two", "comma-separated whole numbers"), ("0,-1", "at least 0")):
        monkeypatch.setattr(sys, "argv", ["bench_gpu.py", "--small", "--device", "cpu", "--num-workers", workers])
        with pytest.raises(SystemExit, match=f"--num-workers: {message}"):
            gpu.main()


def test_quality_longer_horizon_scores_fairseq_interval_checkpoints(monkeypatch, tmp_path):
    """--eval-every N trains with fairseq's interval checkpoints, which run_variant scores."""
    quality = bench_module("bench_quality", monkeypatch, tmp_path)
    cfg = {"data": {"sentences_bin": "bin"}, "batch_size": 4, "layers": 1, "dim": 8, "heads": 1, "lr": "1e-3",
           "warmup_share": 0.06, "temperature": "0.1", "contrastive_pooling": "mean"}
    args = [str(a) for a in quality.train_command(cfg, "MLM only", "mlm", ["--mlm-only"], 1, 1, tmp_path, 20,
                                                  eval_every=10)]
    i = args.index("--save-interval-updates")
    assert args[i + 1] == "10" and args[args.index("--keep-interval-updates") + 1] == "-1"
    # an interval that ends an epoch is saved only as the epoch's checkpoint
    assert "--no-epoch-checkpoints" not in args
    plain = [str(a) for a in quality.train_command(cfg, "MLM only", "mlm", ["--mlm-only"], 1, 1, tmp_path, 20)]
    assert "--save-interval-updates" not in plain and "--no-epoch-checkpoints" in plain
    import torch

    for name, updates in (("checkpoint_3_10.pt", 10), ("checkpoint2.pt", 20), ("checkpoint1.pt", 7),
                          ("checkpoint_last.pt", 20)):
        torch.save({"optimizer_history": [{"num_updates": updates}], "cfg": None}, tmp_path / name)
    assert [(u, p.name) for u, p in quality.intermediate_checkpoints(tmp_path, 10)] == [
        (10, "checkpoint_3_10.pt"), (20, "checkpoint2.pt")]


def test_continued_benchmark_parses_the_runs_summary_line(monkeypatch):
    bench = bench_module("bench_continued", monkeypatch)
    log = ("2026-11-25 | INFO | fairseq_clear.tasks.sts_validation | STS-B dev Spearman: start 78.90 -> best "
           "79.10 (update 20), last 78.50 (update 30); every score: 0: 78.90, 10: 79.00, 20: 79.10, 30: 78.50\n")
    assert bench.parse_summary(log) == {
        "start": 78.9, "best": 79.1, "best_update": 20, "last": 78.5, "last_update": 30, "note": "",
        "history": [[0, 78.9], [10, 79.0], [20, 79.1], [30, 78.5]]}
    worse = log.replace("(update 30)", "(update 30); nothing beat the start: checkpoint_best.pt holds the "
                                       "starting model")
    assert bench.parse_summary(worse)["note"].startswith("nothing beat the start")
    assert bench.compare({"STS-B": 80.0, "SICK-R": 70.0, "Avg": 75.0}, {"STS-B": 81.0, "SICK-R": 69.5, "Avg": 75.25}) \
        == {"delta": {"STS-B": 1.0, "SICK-R": -0.5}, "helps": ["STS-B"], "hurts": ["SICK-R"]}


@pytest.mark.bench_smoke
def test_continued_benchmark_runs_in_its_quick_form(tmp_path):
    """bench_continued.py --quick from its own MLM-only start: each mode through run.sh, the start and
    the exported model scored, the dev line parsed, the summary JSON and the plot written."""
    from helpers import shared

    # shared() skips without ../shared/data, and fails under CI=true, where it must be present
    shared("corpus", "wiki1m_for_simcse_sample")
    dev = tmp_path / "sts-dev.csv"
    with open(shared("sts", "STSBenchmark", "sts-dev.csv"), encoding="utf-8") as f:
        dev.write_text("".join(f.readline() for _ in range(100)), encoding="utf-8")
    out = tmp_path / "continued.json"
    run_cli([sys.executable, STUDIES / "bench_continued.py", "--quick", "--starts", "mlm", "--sts-dev", dev,
             "--work", tmp_path / "work", "--out", out], timeout=1500)
    results = json.loads(out.read_text())
    runs = results["runs"]["mlm"]
    assert set(runs) == {"simcse-unsup", "clear", "declutr"}
    for mode, r in runs.items():
        assert r["dev"]["start"] is not None and [u for u, _ in r["dev"]["history"]][0] == 0, (mode, r)
        assert r["dev_never_below_start"] and r["dev"]["best"] >= r["dev"]["start"]
        assert set(r["sts_start"]) == {"STS-B", "Avg"} and set(r["sts_exported"]) == {"STS-B", "Avg"}
    assert (tmp_path / "continued_dev.png").stat().st_size > 0 and out.stat().st_size < 100_000


def test_bench_senteval_reads_its_rows_and_says_which_claims_hold(monkeypatch, tmp_path):
    bench = bench_module("bench_senteval", monkeypatch, tmp_path)
    rows = {"MLM only": {"table": {"SST2": 70.0, "Downstream": 60.0, "Avg": 60.0}, "seconds": 10.0},
            "CLEAR": {"table": {"SST2": 72.0, "Downstream": 62.5, "Avg": 62.5}, "seconds": 12.0},
            "SimCSE": {"table": {"SST2": 65.0, "Downstream": 55.0, "Avg": 55.0}, "seconds": 11.0}}
    assert bench.observations(rows) == {"CLEAR > MLM only (downstream)": True,
                                        "SimCSE > MLM only (downstream)": False}
    table = bench.format_table(rows)
    assert "| CLEAR | 72.00 | 62.50 | 62.50 | 12 |" in table and "MRPC" not in table
    assert bench.parse_run("x=a/b.pt:d") == ("x", (bench.Path("a/b.pt"), bench.Path("d")))
    bench.plot(rows, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_multitask_benchmark_rows_are_the_task_s_schedules_and_its_summary_skips_na(monkeypatch, tmp_path):
    """bench_multitask's rows name real --schedule choices; the majority-class floor is read from the dev
    labels; the summary is the mean/std over seeds with a
    baseline's n/a sentiment left out (not averaged as 0), and the table is plotted."""
    bench = bench_module("bench_multitask", monkeypatch, tmp_path)
    from fairseq_clear.data.multitask_dataset import SCHEDULES

    schedules = {opts[opts.index("--schedule") + 1] for _, opts, _ in bench.ROWS.values() if "--schedule" in opts}
    assert schedules <= set(SCHEDULES) and {"fusion", "average", "round-robin-batch"} <= schedules
    # Table 1's rows: the sentiment head only, the pair tasks scored by the [CLS] cosine
    table1 = {row: spec for row, spec in bench.ROWS.items() if row.startswith("table1/")}
    assert len(table1) == 4 and all(scoring == "cosine" and opts[opts.index("--tasks") + 1] == "sentiment"
                                    for _, opts, scoring in table1.values())
    for task, labels in (("sentiment", "1 0 1 1"), ("paraphrase", "0 0 1 0 0")):
        (tmp_path / "data" / task / "label").mkdir(parents=True)
        (tmp_path / "data" / task / "label" / "valid.label").write_text(labels.replace(" ", "\n") + "\n")
    assert bench.majority(tmp_path / "data") == {"sentiment_acc": 0.75, "paraphrase_acc": 0.8}
    runs = [{"row": "fusion", "seed": s, "overall": o, "sentiment_acc": 0.5, "paraphrase_acc": 0.7, "sts_pearson": 0.6}
            for s, o in ((1, 0.6), (2, 0.8))]
    runs.append({"row": "baseline: start, cosine of [CLS]", "seed": 1, "overall": 0.5, "sentiment_acc": None,
                 "paraphrase_acc": 0.6, "sts_pearson": 0.4})
    out = tmp_path / "mt.json"
    bench.summarise({"runs": runs}, out, "start", 2)
    summary = json.loads(out.read_text())["summary"]
    assert summary["fusion"]["overall"]["n"] == 2
    assert summary["fusion"]["overall"]["mean"] == pytest.approx(0.7)
    assert summary["fusion"]["overall"]["std"] == pytest.approx(0.1)
    assert "sentiment_acc" not in summary["baseline: start, cosine of [CLS]"]
    assert out.with_suffix(".png").stat().st_size > 0
    claims = json.loads(out.read_text())["observations"]  # the seed's orderings whose rows ran
    assert set(claims) == {"all three heads trained: fusion > the start's [CLS] cosine (paraphrase and STS only)"}
    (claim,) = claims.values()
    assert claim["holds"] and claim["difference"] == pytest.approx(0.15)  # (0.7 + 0.6) / 2 - (0.6 + 0.4) / 2


def test_negatives_quality_benchmark_reads_sizes_counts_and_summarises(monkeypatch, tmp_path):
    """bench_negatives_quality: the STS avg per size from clear-eval-sts's JSON layout, the masked counts
    summed and the last wall time from a json training log, and a summary per row and size with its plot."""
    bench = bench_module("bench_negatives_quality", monkeypatch, tmp_path)
    sts = {"models": {"checkpoint_last": {"mean": {"table": {"STS-B": 80.0, "Avg": 79.0}},
                                          "mean@64": {"table": {"STS-B": 76.0, "Avg": 75.5}}}}}
    assert bench.averages(sts) == {bench.FULL: 79.0, 64: 75.5}
    assert bench.full_table(sts)["STS-B"] == 80.0
    log = tmp_path / "train.log"
    log.write_text('2026 | INFO | train_inner | {"num_updates": "1", "dup_masked": "3", "guide_masked": "10.5", '
                   '"wall": "4"}\n2026 | INFO | fairseq_cli.train | begin\n'
                   '2026 | INFO | train_inner | {"num_updates": "2", "dup_masked": "2", "wall": "9"}\n')
    assert bench.log_stats(log) == {"dup_masked": 5.0, "guide_masked": 10.5, "train_seconds": 9.0}
    sizes = (bench.FULL, *bench.SIZES)
    runs = [{"row": row, "seed": seed, "avg": {d: base + seed - d / 100 for d in sizes}}
            for row, base in (("plain", 80.0), ("matryoshka", 81.0)) for seed in (1, 2)]
    runs += [{"row": f"trained-at-{d}", "seed": 1, "avg": {d: 70.0}} for d in bench.SIZES]
    out = tmp_path / "nq.json"
    bench.summarise({"runs": runs, "start": {d: 78.0 for d in sizes}},
                    argparse.Namespace(out=str(out), seeds=[1, 2]))
    summary = json.loads(out.read_text())["summary"]
    assert summary["plain"][str(bench.FULL)]["mean"] == pytest.approx(80.0 + 1.5 - bench.FULL / 100)
    assert summary["matryoshka"]["32"]["std"] == pytest.approx(0.5) and summary["trained-at-64"]["64"]["n"] == 1
    claims = json.loads(out.read_text())["observations"]
    assert claims["matryoshka > plain, truncated to 32"]["holds"]  # 81 vs 80 at every size
    assert claims["matryoshka at 64 >= the model trained at 64"]["difference"] == pytest.approx(81.0 + 1.5 - 0.64 - 70.0)
    assert "mined > random hard negatives" not in claims  # neither row ran
    only = tmp_path / "matryoshka_only.json"  # --rows without the negatives rows: the plot has no bars
    bench.summarise({"runs": [r for r in runs if r["row"] != "plain"], "start": {d: 78.0 for d in sizes}},
                    argparse.Namespace(out=str(only), seeds=[1, 2]))
    assert only.with_suffix(".png").stat().st_size > 0
    assert out.with_suffix(".png").stat().st_size > 0


def _quality_run(variant, seed, cls, mean, seconds=10.0):
    """One run as bench_quality.run_variant returns it (the fields summarize() reads)."""
    tables = {p: {"STS-B": v, "SICK-R": v, "Avg": v} for p, v in (("cls", cls), ("mean", mean))}
    return {"variant": variant, "seed": seed, "tag": "equal-updates", "updates": 200, "train_seconds": seconds,
            "sts": {p: {"avg": t["Avg"], "table": t} for p, t in tables.items()}, "glue": {}, "final": {}}


@pytest.mark.bench_smoke
def test_beyond_clear_quality_rows_add_one_option_and_its_table_replaces_only_its_block(monkeypatch, tmp_path):
    """bench_beyond_clear_quality.py: each row is bench_quality's SimCSE-unsup or best CLEAR row plus its
    option(s) alone; the generated table says which goal is met and replaces its own block of the write-up."""
    bench = bench_module("bench_beyond_clear_quality", monkeypatch, tmp_path)
    rows = bench.variants(tmp_path / "syn.json", 32)
    simcse, clear = rows["SimCSE-unsup"][1], rows["MLM+del-span+reorder"][1]
    assert simcse[simcse.index("--augmentations") + 1] == "none"
    esim = rows["ESimCSE (word-rep + queue)"][1]
    assert esim[esim.index("--augmentations") + 1] == "word-rep" and len(esim) == len(simcse) + 6
    assert esim[-4:] == ["--queue-size", "80", "--queue-momentum", "0.995"]
    assert rows["SimCSE-unsup + queue"][1] == simcse + esim[-4:]
    short = esim[-4:-1] + [str(bench.SHORT_MOMENTUM)]  # the momentum scaled to the run's 200 updates
    assert rows[f"ESimCSE, m {bench.SHORT_MOMENTUM}"][1] == esim[:-4] + short
    assert rows[f"SimCSE-unsup + queue, m {bench.SHORT_MOMENTUM}"][1] == simcse + short
    assert rows["MLM+del-span+reorder + sentence-MLM"][1][:len(clear)] == clear
    runs = [_quality_run(n, s, 40.0, base + s, seconds)
            for n, base, seconds in (("SimCSE-unsup", 50.0, 10.0), ("ESimCSE (word-rep + queue)", 52.0, 15.0))
            for s in (1, 2, 3)]
    table = bench.bench_quality.summarize(runs, {n: "simcse" for n in rows})
    goals = bench.judge(table, runs)
    result = {"table": table, "goals": goals, "commands": ["python x.py"], "machine": {"date": "today"},
              "loadavg_before": [1.0], "settings": {"seeds": [1, 2, 3], "updates": 200, "batch_size": 32}}
    text = bench.markdown(result)
    assert "| ESimCSE (word-rep + queue) | 3 | 40.00 ± 0.00 | 54.00 ± 1.00 | 15 |" in text
    # +2 but the seeds' spreads overlap; paired by seed, each seed's own difference
    assert "| +2.00 | +1 | False | not met | +2.00, +2.00, +2.00 (every seed ≥ +1: True) |" in text
    runs[-1]["sts"]["mean"]["avg"] = 53.5  # ESimCSE's seed 3: +0.50 over its SimCSE-unsup
    assert "| +1.50 | +1 | False | not met | +2.00, +2.00, +0.50 (every seed ≥ +1: False) |" in \
        bench.markdown(dict(result, goals=bench.judge(bench.bench_quality.summarize(runs, {n: "simcse" for n in rows}),
                                                       runs)))
    # --from-mlm: the SimCSE rows continue one start, beside the start's own score
    continued = bench.continued(rows, "/s/checkpoint_last.pt")
    assert continued["the start (MLM only)"][0] == "init"
    assert set(continued) == {"the start (MLM only)"} | {n for n, r in rows.items() if r[0] == "simcse"}
    assert all(r[1][-2:] == ["--finetune-from-model", "/s/checkpoint_last.pt"] for r in continued.values())
    page = tmp_path / "12.md"
    page.write_text("## 12. heading\n\nprose\n", encoding="utf-8")
    bench.write_markdown(text, page)
    bench.write_markdown(text.replace("54.00", "55.00"), page)
    written = page.read_text(encoding="utf-8")
    assert written.startswith("## 12. heading\n\nprose\n") and written.count(f"{bench.MARK}: begin") == 1
    assert "55.00" in written and "54.00 ±" not in written
    # a study at other updates: its own block beside the benchmark's, each replaced only by its own
    mark = bench.MARK + "-600-updates"
    bench.write_markdown(bench.markdown(result, mark).replace("54.00", "56.00"), page, mark=mark)
    bench.write_markdown(bench.markdown(result, mark).replace("54.00", "57.00"), page, mark=mark)
    bench.write_markdown(text.replace("54.00", "58.00"), page)
    written = page.read_text(encoding="utf-8")
    assert written.count(f"{mark}: begin") == 1 and written.count(f"{bench.MARK}: begin") == 1
    assert "57.00" in written and "58.00" in written and "56.00" not in written and "55.00" not in written


@pytest.mark.bench_smoke
def test_distill_student_table_judges_the_goal_on_the_distilled_student(monkeypatch, tmp_path, capsys):
    bench = bench_module("bench_distill_student", monkeypatch, tmp_path)
    row = lambda sts, rate, speedup, layers=2: {"layers": layers, "sts": sts, "sts_b": sts + 1,  # noqa: E731
                                                "sentences_per_s": rate, "speedup": speedup}

    def run(seed, sts, minutes=9.0, speedup=2.9, **settings):
        result = {"command": "python x.py", "machine": {"date": "today"}, "loadavg_before": [1.0],
                  "speed_sentences": 10, "settings": {"seed": seed, "updates": 150, "repeats": 3, **settings},
                  "train_minutes": {"distilled": minutes, "simcse": 5.0},
                  "arms": {a: {"updates": 150, "threads": 1, "parallel": False} for a in ("simcse", "distilled")},
                  "rows": {"teacher": row(78.9, 100.0, 1.0, 6), "student, distilled (KL)": row(sts, 290.0, speedup)}}
        result["seeds"] = bench.seed_runs([result])
        result["goal"] = bench.judge(result["seeds"], speedup)
        return result

    result = run(1, 74.0)
    text = bench.markdown(result)
    assert "| student, distilled (KL) | 2 | 74.00 | 75.00 | 290 | 2.90 |" in text
    assert "74.00 at 2.90x, 9.0 minutes of training -> not met." in text
    assert text.endswith(f"<!-- {bench.MARK}: end -->")
    assert "teacher's terms: 1.80x the SimCSE-unsup student's" in text  # 9 / 5 minutes at equal updates
    assert "distilled 9.0 (150 updates, 1 thread)" in text and "on each seed" not in text
    assert bench.judge(run(1, 75.5)["seeds"], 2.9)["met"]
    assert not bench.judge(run(1, 75.5, minutes=61.0)["seeds"], 2.9)["met"]  # past the hour of training
    assert not bench.judge(run(1, 75.5, speedup=2.4)["seeds"], 2.4)["met"]
    assert not bench.judge(run(1, 75.5, minutes=None)["seeds"], 2.9)["met"]  # a training time not recorded
    # an arm reused from another invocation (other updates or threads): no ratio from the minutes
    result["arms"]["distilled"] = {"updates": 250, "threads": 2, "parallel": False}
    result["arms"]["simcse"]["threads"] = None
    text = bench.markdown(result)
    assert "1.80x" not in text and "their minutes give no cost per update" in text
    assert "distilled 9.0 (250 updates, 2 threads), simcse 5.0 (150 updates, threads not recorded)" in text

    # other seeds: the goal on the mean, the slowest student and the longest training
    result, others = run(1, 75.5), {"s2.json": run(2, 74.1, minutes=10.0, speedup=2.8), "s3.json": run(3, 76.0)}
    bench.check_seed_results(result["settings"], others)
    result["seeds"] = bench.seed_runs([result, *others.values()])
    result["goal"] = goal = bench.judge(result["seeds"], 2.9)
    assert goal["sts"] == pytest.approx((75.5 + 74.1 + 76.0) / 3) and goal["lowest"] == 74.1 and goal["n"] == 3
    assert goal["sd"] == pytest.approx(statistics.stdev([75.5, 74.1, 76.0])) and goal["met"]
    assert (goal["speedup"], goal["minutes"]) == (2.8, 10.0)
    text = bench.markdown(result)
    assert "| 2 | 74.10 | 75.10 | 10.0 | 2.80 |" in text and "| 3 | 76.00 | 77.00 | 9.0 | 2.90 |" in text
    assert (f"{goal['sts']:.2f} ± {goal['sd']:.2f} (mean ± sd of 3 seeds, lowest 74.10) at 2.80x (the slowest), "
            "10.0 minutes of training (the longest) -> met.") in text
    others["s3.json"]["rows"]["student, distilled (KL)"]["sts"] = 70.0
    assert not bench.judge(bench.seed_runs([result, *others.values()]), 2.9)["met"]  # mean 73.2
    others["s3.json"]["rows"]["student, distilled (KL)"]["sts"] = 76.0
    others["s2.json"]["rows"]["student, distilled (KL)"]["speedup"] = float("nan")  # not first: min() skips it
    assert not bench.judge(bench.seed_runs([result, *others.values()]), 2.9)["met"]
    others["s2.json"]["rows"]["student, distilled (KL)"]["speedup"] = 2.8
    # runs that are not other seeds of the same settings are refused, naming the file
    refused = {"updates": run(2, 75.0, updates=300), "seed": run(1, 75.0), "student": run(2, 75.0)}
    del refused["student"]["rows"]["student, distilled (KL)"]
    for what, bad in {"its updates differ": refused["updates"], "seed 1 is also this run's": refused["seed"],
                      "no distilled student": refused["student"]}.items():
        with pytest.raises(ValueError, match=f"--seed-results bad.json: .*{what}"):
            bench.check_seed_results(result["settings"], {"bad.json": bad})
    # on the command line, before any training: one error line naming the file
    (tmp_path / "sentences.txt").write_text("a sentence of six words here\n", encoding="utf-8")
    cli = {"layers": 2, "batch_size": 64, "distill_lr": "the recipe's", "distill_args": "", "training_threads": 1,
           "training_sentences": 1}  # the command line's below, but for its 150 updates
    (tmp_path / "bad.json").write_text(json.dumps(run(2, 75.0, **cli, **{"updates": 300})), encoding="utf-8")
    (tmp_path / "cut.json").write_text('{"settings": {', encoding="utf-8")
    with pytest.raises(ValueError, match="--seed-results other.json: not a result of this script"):
        bench.check_seed_results(result["settings"], {"other.json": {"settings": {}}})
    for argv, said in ((["--seed-results", str(tmp_path / "missing.json")], "missing.json: no such file"),
                       (["--seed-results", str(tmp_path / "cut.json")], "cut.json: not a result of this script"),
                       (["--seed-results", str(tmp_path / "bad.json")], "bad.json: its updates differ"),
                       (["--arms", "simcse", "--seed-results", str(tmp_path / "bad.json")], "no distilled student")):
        with pytest.raises(SystemExit):
            bench.main(["--work", str(tmp_path), *argv])
        assert said in capsys.readouterr().err
