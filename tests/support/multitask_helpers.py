"""Tiny seed-004 data for the multi-task tests: GLUE-shaped SST-2 / MRPC / STS-B files of synthetic
sentences, prepared with clear-prepare-multitask over a tiny sentencepiece data directory."""

import random
from pathlib import Path

from helpers import make_binarized, run_cli, synthetic_sentences
import sys


def write_glue(root: Path, sizes=(("train", 96), ("dev", 32))) -> Path:
    rng = random.Random(0)
    glue = root / "glue"

    def write(path, header, rows):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + "\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")

    for split, n in sizes:
        s = synthetic_sentences(3 * n, seed=7 if split == "train" else 8)
        write(glue / "SST-2" / f"{split}.tsv", "sentence\tlabel",
              [(s[i], str(int("dog" in s[i] or "cat" in s[i]))) for i in range(n)])
        write(glue / "MRPC" / f"{split}.tsv", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String",
              [(str(int(i % 2 == 0)), "1", "2", s[i], s[i] if i % 2 == 0 else s[i + n]) for i in range(n)])
        write(glue / "STS-B" / f"{split}.tsv",
              "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
              [(str(i), "g", "f", "y", "o", "s", "s", s[i], s[i + (i % 3) * n // 2],
                f"{5.0 if i % 3 == 0 else rng.uniform(0, 3):.3f}") for i in range(n)])
    return glue


def make_multitask_data(root: Path, sts_rows: int = 0) -> Path:
    """(DATA of --task multitask); ``sts_rows`` > 0 makes STS smaller than the others."""
    root = Path(root)
    tokenizer = make_binarized(root / "spm", synthetic_sentences(400, 0), synthetic_sentences(40, 1))
    glue = write_glue(root)
    out = root / "mt"
    args = [sys.executable, "-m", "fairseq_clear.cli.prepare_multitask", "--glue-dir", glue, "--paraphrase", "MRPC",
            "--tokenizer-from", tokenizer, "--out", out]
    run_cli(args)
    return out


def train_args(data, save_dir, *extra, max_update=0, max_epoch=2, batch_size=8):
    from helpers import USER_DIR, bin_path

    return [
        bin_path("fairseq-train"), data, "--user-dir", USER_DIR, "--task", "multitask", "--criterion", "multitask",
        "--arch", "clear_roberta_tiny", "--tokens-per-sample", "64", "--batch-size", str(batch_size),
        "--optimizer", "adam", "--lr", "1e-3", "--max-epoch", str(max_epoch), "--max-update", str(max_update),
        "--log-format", "json", "--log-interval", "1", "--save-dir", save_dir, "--cpu", "--num-workers", "0",
        "--seed", "1", "--no-epoch-checkpoints", *extra,
    ]


def build(data, *extra, criterion=True):
    """(task, model[, criterion]) as fairseq-train builds them for --task multitask, the train split
    loaded."""
    from harness.runs import build_task

    task, cfg = build_task(data, "--task", "multitask", "--criterion", "multitask", "--batch-size", "8",
                           "--tokens-per-sample", "64", *extra)
    model = task.build_model(cfg.model)
    return (task, model, task.build_criterion(cfg.criterion)) if criterion else (task, model)
