#!/usr/bin/env python
"""`make demo`: CLEAR end to end on CPU, from raw text to sentence similarities.

1. corpus: WordNet's glosses and usage examples (through nltk; no download,
   nothing committed to the repository), or any plain-text file (--corpus);
2. `clear-prepare`: sentences -> sentencepiece -> fairseq-preprocess;
3. `fairseq-train --user-dir fairseq_clear --task clear --criterion clear`
   with a small model for a few hundred updates;
4. the trained encoder, loaded through the hub, scores a few sentence pairs.

Every step is skipped when its output is already complete, so running the demo
again is cheap; --force-train retrains.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# WordNet for nltk, as `make wordnet` installs it (scripts/install_wordnet.sh)
os.environ.setdefault("NLTK_DATA", str(REPO / "nltk_data"))

PAIRS = [
    ("A dog is running through the park.", "A puppy runs across the park."),
    ("A dog is running through the park.", "The stock market fell sharply today."),
    ("The stock market fell sharply today.", "Share prices dropped steeply this morning."),
    ("She plays the violin in an orchestra.", "A musician performs with a symphony."),
    ("She plays the violin in an orchestra.", "The river flooded the low fields."),
]


def step(title):
    print(f"\n== {title}", flush=True)


def run(cmd, log_path=None, threads=None):
    """Run a command, streaming its output (and teeing it to log_path)."""
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    log = open(log_path, "w", encoding="utf-8") if log_path else None
    proc = subprocess.Popen(
        [str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1", **({"OMP_NUM_THREADS": str(threads)} if threads else {})),
    )
    for line in proc.stdout:
        if log:
            log.write(line)
        if log is None or "| train_inner |" in line or "| valid |" in line or "Error" in line:
            sys.stdout.write(line if log is None else _short(line))
            sys.stdout.flush()
    code = proc.wait()
    if log:
        log.close()
    if code != 0:
        sys.exit(f"command failed with exit code {code}" + (f"; see {log_path}" if log_path else ""))


def _short(line):
    if "{" not in line:
        return line
    rec = json.loads(line[line.index("{"):])
    keys = ("num_updates", "loss", "mlm_loss", "cl_loss", "cl_acc", "ups")
    return "  " + "  ".join(f"{k}={rec[k]}" for k in keys if k in rec) + "\n"


def training_records(log_path):
    records = []
    for line in Path(log_path).read_text(encoding="utf-8").splitlines():
        if "| train_inner |" in line and "{" in line:
            records.append(json.loads(line[line.index("{"):]))
    return records


def print_curve(records, every):
    print(f"{'update':>7} {'mlm_loss':>9} {'cl_loss':>8} {'cl_acc%':>8}")
    for rec in records:
        if int(rec["num_updates"]) % every == 0 or rec is records[-1]:
            print(f"{rec['num_updates']:>7} {rec['mlm_loss']:>9} {rec['cl_loss']:>8} {rec['cl_acc']:>8}")
    first, last = records[: max(1, len(records) // 10)], records[-max(1, len(records) // 10):]

    def avg(rs, k):
        return sum(float(r[k]) for r in rs) / len(rs)

    print(
        f"mean over the first and last tenth of the run: mlm_loss {avg(first, 'mlm_loss'):.3f} -> "
        f"{avg(last, 'mlm_loss'):.3f} bits, cl_loss {avg(first, 'cl_loss'):.3f} -> "
        f"{avg(last, 'cl_loss'):.3f} bits"
    )


def plot_curve(log_path, path):
    """The run's curves through the library's plot (the same as `clear-plot LOG --out PNG`)."""
    from fairseq_clear.evaluation.training_log import curves, plot_curves, read_log

    return plot_curves({"demo": curves(read_log(log_path), ("mlm_loss", "cl_loss", "cl_acc"))}, str(path))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="demo", help="working directory (default: demo)")
    p.add_argument("--corpus", help="plain-text corpus to use instead of WordNet's glosses")
    p.add_argument("--input-format", default="auto",
                   help="layout of --corpus for clear-prepare: text (paragraphs, split with Punkt), "
                        "lines (one sentence per line), wikitext or auto (default: auto)")
    p.add_argument("--vocab-size", type=int, default=8000, help="sentencepiece vocabulary (default: 8000)")
    p.add_argument("--arch", default="clear_roberta_tiny", help="model size (default: clear_roberta_tiny)")
    p.add_argument("--augmentations", default="del-span,reorder",
                   help="CLEAR augmentation composition (default: del-span,reorder, the paper's best "
                        "table-free one on both GLUE and STS)")
    p.add_argument("--max-update", type=int, default=400, help="updates (default: 400)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per update (default: 64)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for training (default: 2)")
    p.add_argument("--force-train", action="store_true", help="train again even if a checkpoint exists")
    args = p.parse_args()

    started = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

    step("1/4 corpus")
    if args.corpus:
        corpus = Path(args.corpus).resolve()
        if not corpus.is_file():
            sys.exit(f"--corpus: no such file: {corpus}")
        print(f"using {corpus}")
    else:
        from fairseq_clear.preprocessing.wordnet_corpus import build_wordnet_corpus

        corpus = out / "wordnet_glosses.txt"
        if corpus.is_file():
            print(f"{corpus} exists")
        else:
            stats = build_wordnet_corpus(str(corpus))
            print(f"wrote {corpus}: {stats}")

    step("2/4 preprocess: sentences -> sentencepiece -> fairseq-preprocess")
    prepared = out / "prepared"
    if args.corpus:
        layout = ["--input-format", args.input_format]
    else:  # one gloss or example per line; a blank line closes each synset
        from fairseq_clear.preprocessing.wordnet_corpus import PREPARE_ARGS as layout
    run([BIN / "clear-prepare", corpus, prepared, "--vocab-size", args.vocab_size,
         "--workers", "2", "--tokens-per-sample", "64", *layout])
    data = prepared / "data-bin"

    step(f"3/4 pre-train CLEAR ({args.arch}, {args.augmentations}, {args.max_update} updates on CPU)")
    save = out / "checkpoints"
    log_path = out / "train.log"
    last = save / "checkpoint_last.pt"
    done = last.is_file() and log_path.is_file() and any(
        int(r["num_updates"]) >= args.max_update for r in training_records(log_path)
    )
    if done and not args.force_train:
        print(f"{last} already holds {args.max_update} updates (--force-train to retrain)")
    else:
        if args.force_train and save.is_dir():
            for f in save.glob("checkpoint*.pt"):
                f.unlink()
        run([
            BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_clear",
            "--task", "clear", "--criterion", "clear", "--arch", args.arch,
            "--augmentations", args.augmentations, "--tokens-per-sample", "64",
            "--batch-size", args.batch_size, "--max-update", args.max_update,
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6",
            "--weight-decay", "0.01", "--lr", "1e-3", "--lr-scheduler", "polynomial_decay",
            "--warmup-updates", str(max(1, args.max_update // 10)),
            "--total-num-update", args.max_update,
            "--dropout", "0.1", "--attention-dropout", "0.1",
            "--cpu", "--num-workers", "0", "--seed", "1",
            "--log-format", "json", "--log-interval", "10",
            "--save-dir", save, "--no-epoch-checkpoints", "--disable-validation",
        ], log_path=log_path, threads=args.threads)
    records = training_records(log_path)
    print()
    print_curve(records, every=max(10, args.max_update // 10))
    plot = plot_curve(log_path, out / "losses.png")
    print(f"checkpoint: {last}")
    if plot:
        print(f"loss curves: {plot}")

    step("4/4 sentence similarity from the trained encoder (cosine)")
    import fairseq_clear  # noqa: F401  (safe checkpoint loading)
    from fairseq_clear.models.clear_roberta import ClearRobertaModel

    hub = ClearRobertaModel.from_pretrained(
        str(save), checkpoint_file="checkpoint_last.pt", data_name_or_path=str(data),
        bpe="sentencepiece", sentencepiece_model=str(data / "sentencepiece.model"),
    )
    hub.eval()
    firsts, seconds = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    cls = hub.similarity(firsts, seconds, pairwise=True, pooling="cls")
    mean = hub.similarity(firsts, seconds, pairwise=True, pooling="mean")
    print(f"  {'[CLS]':>6} {'mean':>6}")
    for (a, b), c, m in zip(PAIRS, cls, mean):
        print(f"  {float(c):+.3f} {float(m):+.3f}  {a}  |  {b}")
    print("  (a tiny model after a few hundred CPU updates: expect related pairs only somewhat "
          "above unrelated ones; clear-eval-sts measures this properly)")
    print(f"\ndemo finished in {time.time() - started:.0f} s; everything is under {out}")


if __name__ == "__main__":
    main()
