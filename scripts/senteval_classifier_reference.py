"""Run the original SentEval's transfer and probing classifiers (senteval/engine.py with
binary.py, sst.py, trec.py, mrpc.py, sick.py, snli.py, probing.py and tools/classifier.py,
tools/validation.py) on the toy data tree of tests/support/senteval_reference_data.py, and write
their results: the reference that tests/unit/test_senteval_classifier.py holds our
re-implementation (fairseq_clear/evaluation/senteval/classifier.py) to.

    git clone https://github.com/facebookresearch/SentEval /tmp/SentEval
    python scripts/senteval_classifier_reference.py /tmp/SentEval tests/support/data/senteval_classifier_reference.json

SentEval runs its classifiers on CUDA; on a machine without it, its .cuda() and
.to('cuda') calls are made no-ops here (the computation is the same on CPU). Python 3.11
removed inspect.getargspec, which SentEval's optimizer parser calls: getfullargspec stands
in (its first field is the same list). SentEval's SNLI passes its labels as lists, which
torch.from_numpy refuses: they are made arrays. Needs scikit-learn (SentEval imports it).
Run with OMP_NUM_THREADS=1: the classifiers are tiny and threads only slow them down.
"""

import inspect
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
sys.path.insert(0, HERE)
from senteval_reference import _cpu_only  # noqa: E402
from senteval_reference_data import CLASSIFIER_CASES, SENTEVAL_CONFIGS, write_toy_senteval_tree  # noqa: E402


def _patch():
    has_cuda = torch.cuda.is_available()
    _cpu_only()
    if not hasattr(inspect, "getargspec"):
        inspect.getargspec = inspect.getfullargspec
    if not has_cuda:
        to = torch.Tensor.to

        def cpu_to(self, *args, **kwargs):
            args = tuple("cpu" if (isinstance(a, torch.device) and a.type == "cuda")
                         or (isinstance(a, str) and a.startswith("cuda")) else a for a in args)
            if "device" in kwargs and str(kwargs["device"]).startswith("cuda"):
                kwargs["device"] = "cpu"
            return to(self, *args, **kwargs)

        torch.Tensor.to = cpu_to


def _snli_labels_as_arrays():
    """SentEval's snli.py hands its labels to SplitClassifier as Python lists, which
    torch.from_numpy refuses (TypeError): they are made numpy arrays, nothing else changes."""
    import senteval.snli
    from senteval.tools.validation import SplitClassifier

    class ArrayLabels(SplitClassifier):
        def __init__(self, X, y, config):
            super().__init__(X, {k: np.asarray(v) for k, v in y.items()}, config)

    senteval.snli.SplitClassifier = ArrayLabels


def main(senteval_dir, output):
    sys.path.insert(0, senteval_dir)
    _patch()
    import senteval

    _snli_labels_as_arrays()

    commit = subprocess.run(["git", "-C", senteval_dir, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if not commit and os.path.isfile(os.path.join(senteval_dir, "COMMIT")):  # an exported tree
        commit = open(os.path.join(senteval_dir, "COMMIT"), encoding="utf-8").read().strip()
    out = {"senteval_commit": commit or "unknown", "torch": torch.__version__, "cases": {}}
    with tempfile.TemporaryDirectory() as root:
        vectors = write_toy_senteval_tree(root)

        def batcher(params, batch):
            return np.stack([vectors[" ".join(words)] for words in batch])

        for case, task, config, changes in CLASSIFIER_CASES:
            classifier, kfold = SENTEVAL_CONFIGS[config]
            params = {"task_path": root, "usepytorch": True, "kfold": kfold, "seed": 1111,
                      "classifier": {**classifier, **changes}}
            start = time.time()
            result = senteval.engine.SE(params, batcher).eval(task)
            keep = {k: (float(v) if isinstance(v, (float, np.floating)) else int(v))
                    for k, v in result.items() if k in ("devacc", "acc", "f1", "ndev", "ntest")}
            out["cases"][case] = {"task": task, "config": config, "classifier": params["classifier"],
                                  "kfold": kfold, **keep}
            print(case, keep, f"{time.time() - start:.1f} s", flush=True)
    with open(output, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
