"""Run the original SentEval's STS-B / SICK-R regressor (senteval/sick.py, sts.py,
tools/relatedness.py) on the toy problem of tests/support/senteval_reference_data.py and write its
test predictions: the reference that tests/e2e/test_senteval_protocol.py holds our
re-implementation to.

    git clone https://github.com/facebookresearch/SentEval /tmp/SentEval
    python scripts/senteval_reference.py /tmp/SentEval tests/support/data/senteval_relatedness_reference.json

SentEval's regressor asserts CUDA; on a machine without one, its .cuda() calls are made
no-ops here (the computation is the same on CPU). Needs scikit-learn (SentEval imports it).
"""

import json
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from senteval_reference_data import toy_relatedness  # noqa: E402


def _cpu_only():
    if torch.cuda.is_available():
        return
    torch.cuda.is_available = lambda: True
    torch.cuda.manual_seed = lambda seed: None
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self


def _write(task_dir, kind, data):
    if kind == "stsb":
        for split, (s1, s2, y) in data.items():
            with open(os.path.join(task_dir, f"sts-{split}.csv"), "w", encoding="utf-8") as f:
                for k, (a, b, score) in enumerate(zip(s1, s2, y)):
                    f.write(f"g\tf\t2017\t{k}\t{score}\t{a}\t{b}\n")
    else:
        names = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
        for split, (s1, s2, y) in data.items():
            with open(os.path.join(task_dir, names[split]), "w", encoding="utf-8") as f:
                f.write("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n")
                for k, (a, b, score) in enumerate(zip(s1, s2, y)):
                    f.write(f"{k}\t{a}\t{b}\t{score}\tNEUTRAL\n")


def main(senteval_dir, output):
    sys.path.insert(0, senteval_dir)
    _cpu_only()
    from senteval.sick import SICKRelatednessEval
    from senteval.sts import STSBenchmarkEval

    commit = subprocess.run(["git", "-C", senteval_dir, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if not commit and os.path.isfile(os.path.join(senteval_dir, "COMMIT")):  # an exported tree
        commit = open(os.path.join(senteval_dir, "COMMIT"), encoding="utf-8").read().strip()
    out = {"senteval_commit": commit or "unknown", "cases": {}}
    for kind, cls in (("stsb", STSBenchmarkEval), ("sick", SICKRelatednessEval)):
        data, vectors = toy_relatedness(kind)
        with tempfile.TemporaryDirectory() as d:
            _write(d, kind, data)
            task = cls(d, seed=1111)
            params = types.SimpleNamespace(batch_size=64)
            batcher = lambda params, batch: np.stack([vectors[" ".join(words)] for words in batch])  # noqa: E731
            result = task.run(params, batcher)
        out["cases"][kind] = {
            "pearson": float(result["pearson"]), "spearman": float(result["spearman"]),
            "devpearson": float(result["devpearson"]), "mse": float(result["mse"]),
            "yhat": [float(x) for x in result["yhat"]],
        }
        print(kind, {k: v for k, v in out["cases"][kind].items() if k != "yhat"})
    with open(output, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
