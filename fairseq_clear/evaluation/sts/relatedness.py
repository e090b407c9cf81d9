"""SentEval's supervised relatedness protocol for STS-B and SICK-R (``--protocol senteval``).

The original SentEval (which CLEAR's Table 2 used) does not score STS-B and SICK-R by cosine:
``STSBenchmarkEval`` subclasses ``SICKRelatednessEval``, which trains a regressor on frozen
sentence vectors (senteval/sick.py, senteval/tools/relatedness.py):

* features of a pair (u, v): ``[|u - v|, u * v]``;
* labels: Tai et al.'s encoding of a score y as a distribution over the 5 classes 1..5
  (:func:`encode_labels`; STS-B's 0..5 scores go through the same code, as in SentEval);
* model: one linear layer and a softmax, trained with MSE against that distribution, Adam
  (lr 1e-3, no weight decay), batches of 64, in rounds of 50 epochs; after each round the
  prediction ``softmax . [1..5]`` is scored by Pearson on dev, the best round is kept and
  training stops after the fourth round without a new best (at most 1000 epochs);
* each split sorted by (tokens of A, tokens of B, score) before anything else, seed 1111
  for numpy's permutations and torch's initialisation: with the same order and seed the
  batches are SentEval's.

Written from that description and checked against SentEval's code on a fixed embedding
(tests/support/data/senteval_relatedness_reference.json, made by scripts/senteval_reference.py).
"""

import copy
from typing import Dict, Sequence

import numpy as np
import torch

#: SentEval's defaults (senteval/tools/relatedness.py, senteval/sick.py)
SEED = 1111
NCLASSES = 5
BATCH_SIZE = 64
EPOCHS_PER_ROUND = 50
MAX_EPOCH = 1000
PATIENCE = 3


def senteval_order(sent1: Sequence[str], sent2: Sequence[str], scores: Sequence[float]) -> np.ndarray:
    """The order in which SentEval sorts a split: by (words of A, words of B, score), stable."""
    keys = [(len(a.split()), len(b.split()), float(y)) for a, b, y in zip(sent1, sent2, scores)]
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def encode_labels(scores, nclass: int = NCLASSES) -> np.ndarray:
    """Tai, Socher & Manning's encoding: y = 3.4 -> 0.6 on class 3, 0.4 on class 4 (classes 1..nclass)."""
    scores = np.asarray(scores, dtype=np.float64)
    floor = np.floor(scores)
    out = np.zeros((len(scores), nclass), dtype=np.float32)
    rows = np.arange(len(scores))
    upper = floor.astype(np.int64)  # class floor+1 sits in column floor
    lower = upper - 1  # class floor in column floor-1
    ok = (upper >= 0) & (upper < nclass)
    out[rows[ok], upper[ok]] = (scores - floor)[ok]
    ok = (lower >= 0) & (lower < nclass)
    out[rows[ok], lower[ok]] = (floor - scores + 1)[ok]
    return out


def pair_features(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SentEval's pair features ``[|a - b|, a * b]``."""
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    return np.concatenate([np.abs(a - b), a * b], axis=1)


def _pearson(x, y) -> float:
    from scipy.stats import pearsonr

    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0  # SentEval: NaN (constant prediction) counts as 0
    return float(pearsonr(x, y)[0])


def _predict(model, x: torch.Tensor) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        return torch.cat([model(x[i:i + BATCH_SIZE]) for i in range(0, len(x), BATCH_SIZE)]).numpy()


def train_relatedness(train_x, train_scores, dev_x, dev_scores, test_x, seed: int = SEED) -> Dict[str, object]:
    """SentEval's RelatednessPytorch on CPU: ``{'dev_pearson', 'yhat' (test predictions), 'epochs'}``.

    The global numpy and torch RNGs are left as they were."""
    train_y = torch.from_numpy(encode_labels(train_scores))
    train_x, dev_x, test_x = (torch.from_numpy(np.asarray(x, dtype=np.float32)) for x in (train_x, dev_x, test_x))
    dev_scores = np.asarray(dev_scores, dtype=np.float64)
    r = np.arange(1, NCLASSES + 1)
    rng = np.random.RandomState(seed)  # np.random.seed(seed) + np.random.permutation, without the global state
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(train_x.shape[1], NCLASSES), torch.nn.Softmax(dim=-1))
    loss_fn = torch.nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), weight_decay=0.0)
    best_pr, best_model, misses, epoch, stop = -1.0, None, 0, 0, False
    while not stop and epoch <= MAX_EPOCH:
        model.train()
        for _ in range(EPOCHS_PER_ROUND):
            order = torch.from_numpy(rng.permutation(len(train_x)))
            for i in range(0, len(train_x), BATCH_SIZE):
                idx = order[i:i + BATCH_SIZE]
                loss = loss_fn(model(train_x[idx]), train_y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        epoch += EPOCHS_PER_ROUND
        pr = _pearson(_predict(model, dev_x) @ r, dev_scores)
        if pr > best_pr:
            best_pr, best_model = pr, copy.deepcopy(model)
        else:
            if misses >= PATIENCE:
                stop = True
            misses += 1
    return {"dev_pearson": best_pr, "yhat": _predict(best_model, test_x) @ r, "epochs": epoch}


def evaluate_relatedness(splits: Dict[str, tuple], seed: int = SEED) -> Dict[str, float]:
    """SentEval's STS-B / SICK-R result from ``{'train'|'dev'|'test': (vectors A, vectors B, scores,
    sentences A, sentences B)}``: test Pearson and Spearman x100, MSE, dev Pearson x100."""
    from scipy.stats import spearmanr

    data = {}
    for split in ("train", "dev", "test"):
        a, b, y, s1, s2 = splits[split]
        order = senteval_order(s1, s2, y)
        data[split] = (pair_features(np.asarray(a)[order], np.asarray(b)[order]), np.asarray(y, np.float64)[order])
    out = train_relatedness(data["train"][0], data["train"][1], data["dev"][0], data["dev"][1], data["test"][0], seed)
    yhat, gold = out["yhat"], data["test"][1]
    spearman = float(spearmanr(yhat, gold)[0]) if np.ptp(yhat) > 0 else 0.0
    return {
        "pearson": _pearson(yhat, gold) * 100.0,
        "spearman": spearman * 100.0,
        "mse": float(np.mean((yhat - gold) ** 2)),
        "dev_pearson": out["dev_pearson"] * 100.0,
        "epochs": out["epochs"],
        "train_pairs": len(data["train"][1]), "dev_pairs": len(data["dev"][1]), "test_pairs": len(gold),
    }
