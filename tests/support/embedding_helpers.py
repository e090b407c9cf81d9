"""A tiny trained CLEAR checkpoint shared by the hub, STS, GLUE and export tests.

Built once per test session (the first test module that asks trains it), so
the embedding tests pay for one fairseq-train run between them.
"""

import json
import random
import shutil
from pathlib import Path

from helpers import make_binarized, run_cli, synthetic_sentences, train_args

def tiny_checkpoint(work: Path):
    """(checkpoint file, data directory) of a clear_roberta_tiny trained 8 updates, under ``work``.

    Trained with the ``subs`` augmentation, whose synonym table is deleted
    afterwards: loading for inference must not need the training machine's files.
    """
    data = make_binarized(
        work / "corpus", synthetic_sentences(400, seed=0), synthetic_sentences(40, seed=1)
    )
    table = work / "synonyms.json"
    table.write_text(json.dumps({"cat": ["kitten"], "dog": ["puppy"], "big": ["large"]}))
    save = work / "ckpt"
    run_cli(train_args(
        data, save, "--augmentations", "subs,del-word", "--synonym-table", table, max_update=8,
    ))
    table.unlink()
    return save / "checkpoint_last.pt", data


def write_stsb(path: Path, n: int = 60, seed: int = 5):
    """An STS-B-format csv of synthetic pairs: near-identical (5.0), one word added (3.8), unrelated (0.4).

    No pair is two identical strings: equal vectors would tie, and float noise would then
    decide their ranks.
    """
    rng = random.Random(seed)
    sentences = synthetic_sentences(n, seed=seed)
    rows = []
    for i, a in enumerate(sentences):
        if i % 3 == 0:
            b, score = a.replace(".", "!"), 5.0
        elif i % 3 == 1:
            b, score = a.replace(" ", " very ", 1), 3.8
        else:
            b, score = rng.choice(sentences), 0.4
        rows.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{a}\t{b}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_senteval_tree(root: Path, seed: int = 7):
    """A small SentEval-layout STS directory (every task of Table 2) built from synthetic sentences."""
    from fairseq_clear.preprocessing.sts_readers import STS_YEARS

    rng = random.Random(seed)
    sentences = synthetic_sentences(200, seed=seed)

    def pair(i):
        a = sentences[i % len(sentences)]
        kind = i % 3
        b = a.replace(".", "!") if kind == 0 else (a.replace(" ", " quite ", 1) if kind == 1 else rng.choice(sentences))
        return a, b, [4.7, 3.5, 1.0][kind] + rng.random() * 0.3  # within STS's 0-5 and SICK's 1-5

    k = 0
    for year, subsets in STS_YEARS.items():
        d = root / f"{year}-en-test"
        d.mkdir(parents=True, exist_ok=True)
        for subset in subsets:
            inputs, golds = [], []
            for j in range(12):
                a, b, score = pair(k)
                k += 1
                inputs.append(f"{a}\t{b}")
                golds.append("" if j == 5 else f"{score:.2f}")  # one unscored pair per subset
            (d / f"STS.input.{subset}.txt").write_text("\n".join(inputs) + "\n", encoding="utf-8")
            (d / f"STS.gs.{subset}.txt").write_text("\n".join(golds) + "\n", encoding="utf-8")
    stsb = root / "STSBenchmark"
    stsb.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 30), ("dev", 30), ("test", 30)):
        write_stsb(stsb / f"sts-{split}.csv", n=n, seed=seed + len(split))
    sick = root / "SICK"
    sick.mkdir(parents=True, exist_ok=True)
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
        for j in range(30):
            a, b, score = pair(k)
            k += 1
            lines.append(f"{j}\t{a}\t{b}\t{score:.1f}\tNEUTRAL")
        (sick / name).write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")  # CRLF, as the real file
    return root


def copy_data_dir(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest
