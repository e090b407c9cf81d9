"""SentEval's classifier protocol for the transfer and probing tasks, re-implemented.

SentEval (Conneau & Kiela 2018; DeCLUTR's Table 1) trains a classifier on frozen sentence
vectors. Its code (senteval/tools/classifier.py, tools/validation.py and the task files) is
the specification; this module follows it step for step, on CPU:

* the classifier (``MLP`` with ``nhid=0``: logistic regression; ``nhid>0``: Linear, Dropout,
  Sigmoid, Linear), cross-entropy (mean over the batch, as SentEval runs on current PyTorch:
  its ``loss_fn.size_average = False`` assignment no longer changes the reduction), the
  optimizer of the config string ("adam", "rmsprop", "sgd,lr=0.1", ...) with the L2 penalty
  as weight decay; training in rounds of ``epoch_size`` passes, each a fresh permutation of
  the training set, scored on the validation data after each round; the best round is kept
  and training stops after ``tenacity`` rounds without a new best (or past ``max_epoch``);
* the seeds: each classifier seeds numpy's permutations and torch's initialisation with
  ``seed`` (1111) when it is built; here through private generators, so that the caller's
  global RNGs are left as they were;
* the three validation schemes: :func:`inner_kfold` (MR, CR, SUBJ, MPQA: k-fold CV, the L2
  penalty chosen per fold by an inner k-fold), :func:`kfold` (TREC, MRPC: the penalty chosen by
  k-fold CV on train, then trained on all of train with 5% held out for early stopping and
  scored on test) and :func:`split` (SST, SICK-E, SNLI, probing: chosen on dev); the penalty
  grid 1e-5..1e-2; scores rounded to 2 decimals where SentEval rounds them;
* both standard configurations of SentEval's README (:data:`CONFIGS`): ``paper`` (10 folds,
  Adam, batches of 64, tenacity 5, epoch size 4: "comparable to the literature") and
  ``prototyping`` (5 folds, RMSprop, batches of 128, tenacity 3, epoch size 2).

Checked against SentEval's own code on fixed vectors: tests/support/data/senteval_classifier_reference.json
(made by scripts/senteval_reference.py), tests/unit/test_senteval_classifier.py.
"""

import copy
import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ...errors import FairseqClearError

SEED = 1111
#: SentEval's L2 grid for its PyTorch classifier: ``[10**t for t in range(-5, -1)]``
L2_GRID = tuple(10 ** t for t in range(-5, -1))
#: SentEval's validation split when no validation data is given (``validation_split=0.05``)
VALIDATION_SPLIT = 0.05


class SentEvalConfigError(FairseqClearError, ValueError):
    """A classifier setting SentEval cannot use (the message names the option)."""


@dataclass(frozen=True)
class ClassifierConfig:
    """SentEval's ``params['classifier']`` plus ``kfold`` and ``seed``."""

    nhid: int = 0
    optim: str = "adam"
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    dropout: float = 0.0
    kfold: int = 10
    seed: int = SEED

    def as_dict(self):
        return asdict(self)

    @property
    def name(self) -> str:
        """SentEval's model name (validation.get_classif_name)."""
        return f"pytorch-MLP-nhid{self.nhid}-{self.optim}-bs{self.batch_size}"


#: SentEval's README: "default config" (results comparable to the literature) and the
#: "prototyping config" (about 5 times faster)
CONFIGS = {
    "paper": ClassifierConfig(nhid=0, optim="adam", batch_size=64, tenacity=5, epoch_size=4, kfold=10),
    "prototyping": ClassifierConfig(nhid=0, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2, kfold=5),
}


def make_config(name: str = "paper", **overrides) -> ClassifierConfig:
    """One of :data:`CONFIGS` with some fields changed (``None`` values are ignored)."""
    if name not in CONFIGS:
        raise SentEvalConfigError(f"--config: unknown configuration '{name}'; choose from {', '.join(CONFIGS)}")
    cfg = replace(CONFIGS[name], **{k: v for k, v in overrides.items() if v is not None})
    for field, low in (("nhid", 0), ("batch_size", 1), ("tenacity", 0), ("epoch_size", 1), ("max_epoch", 0),
                       ("kfold", 2)):
        if getattr(cfg, field) < low:
            raise SentEvalConfigError(f"--{field.replace('_', '-')} must be >= {low}, got {getattr(cfg, field)}")
    if not (0.0 <= cfg.dropout < 1.0):
        raise SentEvalConfigError(f"--dropout must be in [0, 1), got {cfg.dropout}")
    parse_optimizer(cfg.optim)
    return cfg


_OPTIMIZERS = {
    "adadelta": torch.optim.Adadelta, "adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam,
    "adamax": torch.optim.Adamax, "asgd": torch.optim.ASGD, "rmsprop": torch.optim.RMSprop,
    "rprop": torch.optim.Rprop, "sgd": torch.optim.SGD,
}


def parse_optimizer(spec: str):
    """SentEval's optimizer string ("adam", "sgd,lr=0.1", "adagrad,lr=0.1,lr_decay=0.05") as
    (torch optimizer class, keyword arguments)."""
    import inspect

    method, _, rest = spec.partition(",")
    kwargs = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or re.match(r"^[+-]?(\d+(\.\d*)?|\.\d+)$", value) is None:
            raise SentEvalConfigError(f"--optim '{spec}': '{item}' is not name=number")
        kwargs[key] = float(value)
    if method not in _OPTIMIZERS:
        raise SentEvalConfigError(f"--optim '{spec}': unknown method '{method}'; choose from {', '.join(_OPTIMIZERS)}")
    if method == "sgd" and "lr" not in kwargs:
        raise SentEvalConfigError(f"--optim '{spec}': sgd needs a learning rate, e.g. sgd,lr=0.1")
    cls = _OPTIMIZERS[method]
    known = inspect.signature(cls.__init__).parameters
    unknown = [k for k in kwargs if k not in known or k == "params"]
    if unknown:
        raise SentEvalConfigError(f"--optim '{spec}': {method} has no parameter(s) {', '.join(unknown)}")
    return cls, kwargs


class Classifier:
    """SentEval's ``MLP`` (``nhid=0``: logistic regression), trained by :meth:`fit` on CPU."""

    def __init__(self, cfg: ClassifierConfig, inputdim: int, nclasses: int, l2reg: float = 0.0):
        self.cfg, self.inputdim, self.nclasses, self.l2reg = cfg, inputdim, nclasses, l2reg
        self.model = None
        self.nepoch = 0

    def _build(self):
        cfg = self.cfg
        if cfg.nhid == 0:
            model = torch.nn.Sequential(torch.nn.Linear(self.inputdim, self.nclasses))
        else:
            model = torch.nn.Sequential(
                torch.nn.Linear(self.inputdim, cfg.nhid), torch.nn.Dropout(p=cfg.dropout), torch.nn.Sigmoid(),
                torch.nn.Linear(cfg.nhid, self.nclasses))
        optim_cls, optim_kwargs = parse_optimizer(cfg.optim)
        optimizer = optim_cls(model.parameters(), **optim_kwargs)
        optimizer.param_groups[0]["weight_decay"] = self.l2reg
        return model, optimizer

    def fit(self, x, y, validation_data=None, validation_split=None, early_stop=True) -> float:
        """Train (SentEval's ``fit``); returns the best validation accuracy (0..1)."""
        if validation_data is None and not validation_split:
            raise ValueError("fit needs validation_data or validation_split")
        cfg = self.cfg
        rng = np.random.RandomState(cfg.seed)  # np.random.seed(seed) in SentEval's constructor
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.model, optimizer = self._build()
            x, y = np.asarray(x), np.asarray(y)
            if validation_data is not None:
                (tx, ty), (dx, dy) = (x, y), validation_data
            else:
                perm = rng.permutation(len(x))
                cut = int(validation_split * len(x))
                tx, ty, dx, dy = x[perm[cut:]], y[perm[cut:]], x[perm[:cut]], y[perm[:cut]]
            tx = torch.from_numpy(np.asarray(tx)).to(torch.float32)
            ty = torch.from_numpy(np.asarray(ty)).to(torch.int64)
            dx = torch.from_numpy(np.asarray(dx)).to(torch.float32)
            dy = torch.from_numpy(np.asarray(dy)).to(torch.int64)
            loss_fn = torch.nn.CrossEntropyLoss()
            self.nepoch, best, best_model, misses, stop = 0, -1.0, None, 0, False
            while not stop and self.nepoch <= cfg.max_epoch:
                self.model.train()
                for _ in range(cfg.epoch_size):
                    perm = rng.permutation(len(tx))
                    for i in range(0, len(tx), cfg.batch_size):
                        idx = torch.from_numpy(perm[i:i + cfg.batch_size]).long()
                        loss = loss_fn(self.model(tx[idx]), ty[idx])
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                self.nepoch += cfg.epoch_size
                accuracy = self.score(dx, dy)
                if accuracy > best:
                    best, best_model = accuracy, copy.deepcopy(self.model)
                elif early_stop:
                    if misses >= cfg.tenacity:
                        stop = True
                    misses += 1
        self.model = best_model
        return best

    def predict(self, x) -> np.ndarray:
        self.model.eval()
        x = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        out = []
        with torch.no_grad():
            for i in range(0, len(x), self.cfg.batch_size):
                out.append(self.model(x[i:i + self.cfg.batch_size]).max(1)[1])
        return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)

    def score(self, x, y) -> float:
        """Accuracy (0..1)."""
        if len(x) == 0:
            raise ValueError("cannot score a classifier on no examples")
        y = np.asarray(y).astype(np.int64)
        return float((self.predict(x) == y).sum()) / len(y)


def _fit(cfg, x, y, nclasses, reg, **kw) -> Classifier:
    clf = Classifier(cfg, x.shape[1], nclasses, reg)
    clf.fit(x, y, **kw)
    return clf


def _stratified(k: int, random_state: int):
    from sklearn.model_selection import StratifiedKFold

    return StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)


def _check_folds(y, k, what):
    counts = np.bincount(np.asarray(y, dtype=np.int64))
    counts = counts[counts > 0]
    if len(counts) and counts.min() < k:
        raise SentEvalConfigError(f"{what}: a class has {counts.min()} example(s), fewer than the {k} folds of "
                                  "--kfold; use fewer folds or more data")


def inner_kfold(x, y, nclasses: int, cfg: ClassifierConfig, regs: Sequence[float] = L2_GRID) -> Dict[str, object]:
    """SentEval's ``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA): ``{'devacc', 'acc', 'regs'}``.

    Its folds, outer and inner, are shuffled with random_state 1111 whatever the seed (as in
    SentEval); the classifiers use ``cfg.seed``."""
    x, y = np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.int64)
    _check_folds(y, cfg.kfold, "inner k-fold")
    skf, inner = _stratified(cfg.kfold, 1111), _stratified(cfg.kfold, 1111)
    dev_results, test_results, chosen = [], [], []
    for train_idx, test_idx in skf.split(x, y):
        x_train, x_test, y_train, y_test = x[train_idx], x[test_idx], y[train_idx], y[test_idx]
        _check_folds(y_train, cfg.kfold, "inner k-fold (inner folds)")
        scores = []
        for reg in regs:
            fold_scores = []
            for in_train, in_test in inner.split(x_train, y_train):
                clf = _fit(cfg, x_train[in_train], y_train[in_train], nclasses, reg,
                           validation_data=(x_train[in_test], y_train[in_test]))
                fold_scores.append(clf.score(x_train[in_test], y_train[in_test]))
            scores.append(round(100 * np.mean(fold_scores), 2))
        best = int(np.argmax(scores))
        chosen.append(regs[best])
        dev_results.append(np.max(scores))
        clf = _fit(cfg, x_train, y_train, nclasses, regs[best], validation_split=VALIDATION_SPLIT)
        test_results.append(round(100 * clf.score(x_test, y_test), 2))
    return {"devacc": float(round(np.mean(dev_results), 2)), "acc": float(round(np.mean(test_results), 2)),
            "regs": chosen}


def kfold(train_x, train_y, test_x, test_y, nclasses: int, cfg: ClassifierConfig,
          regs: Sequence[float] = L2_GRID) -> Dict[str, object]:
    """SentEval's ``KFoldClassifier`` (TREC, MRPC): ``{'devacc', 'acc', 'reg', 'yhat'}``."""
    train_x, test_x = np.asarray(train_x, dtype=np.float32), np.asarray(test_x, dtype=np.float32)
    train_y, test_y = np.asarray(train_y, dtype=np.int64), np.asarray(test_y, dtype=np.int64)
    _check_folds(train_y, cfg.kfold, "k-fold")
    skf = _stratified(cfg.kfold, cfg.seed)
    scores = []
    for reg in regs:
        fold_scores = []
        for train_idx, test_idx in skf.split(train_x, train_y):
            clf = _fit(cfg, train_x[train_idx], train_y[train_idx], nclasses, reg,
                       validation_data=(train_x[test_idx], train_y[test_idx]))
            fold_scores.append(clf.score(train_x[test_idx], train_y[test_idx]))
        scores.append(round(100 * np.mean(fold_scores), 2))
    best = int(np.argmax(scores))
    clf = _fit(cfg, train_x, train_y, nclasses, regs[best], validation_split=VALIDATION_SPLIT)
    yhat = clf.predict(test_x)
    return {"devacc": float(np.max(scores)), "acc": float(round(100 * clf.score(test_x, test_y), 2)),
            "reg": regs[best], "dev_by_reg": dict(zip(map(str, regs), scores)), "yhat": yhat}


def split(train, valid, test, nclasses: int, cfg: ClassifierConfig, noreg: bool = False,
          regs: Sequence[float] = L2_GRID) -> Dict[str, object]:
    """SentEval's ``SplitClassifier`` (SST, SICK-E, SNLI, probing): ``{'devacc', 'acc', 'reg'}``.
    ``train``, ``valid``, ``test``: (vectors, labels). ``noreg``: SNLI's single penalty 1e-9.

    SentEval trains the chosen penalty's classifier a second time, with the same seed and data:
    on CPU that is the same classifier, which is kept instead."""
    (tx, ty), (vx, vy), (sx, sy) = [(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.int64))
                                    for a, b in (train, valid, test)]
    if noreg:
        regs = (1e-9,)
    scores, models = [], []
    for reg in regs:
        clf = _fit(cfg, tx, ty, nclasses, reg, validation_data=(vx, vy))
        scores.append(round(100 * clf.score(vx, vy), 2))
        models.append(clf)
    best = int(np.argmax(scores))
    return {"devacc": float(np.max(scores)), "acc": float(round(100 * models[best].score(sx, sy), 2)),
            "reg": regs[best], "dev_by_reg": dict(zip(map(str, regs), scores))}


# ---- features and orders of the tasks ----------------------------------------------------------

def pair_features(a, b, kind: str = "senteval") -> np.ndarray:
    """Pair features as SentEval builds them: ``[|u - v|, u * v]`` (MRPC, SICK-E, SICK-R, STS-B)
    or, for SNLI (``kind='snli'``), ``[u, v, u * v, |u - v|]``."""
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    if kind == "snli":
        return np.hstack((a, b, a * b, np.abs(a - b)))
    return np.c_[np.abs(a - b), a * b]


def sort_single(sentences: Sequence[str], labels: Sequence) -> np.ndarray:
    """SentEval's order of a single-sentence split: by (number of tokens, label), stable."""
    keys = [(len(s.split()), y) for s, y in zip(sentences, labels)]
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def sort_pairs(first: Sequence[str], second: Sequence[str], labels: Sequence) -> np.ndarray:
    """SentEval's order of a pair split: by (tokens of the first, tokens of the second, label)."""
    keys = [(len(a.split()), len(b.split()), y) for a, b, y in zip(first, second, labels)]
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def check_finite(name: str, x: np.ndarray):
    if not np.isfinite(x).all():
        rows = np.where(~np.isfinite(x).all(axis=1))[0]
        raise SentEvalConfigError(f"{name}: {len(rows)} sentence vector(s) hold NaN or Inf (first rows "
                                  f"{rows[:5].tolist()}); a classifier on them would be meaningless")


def f1_binary(y_true, y_pred) -> float:
    """F1 x100 of class 1, rounded as SentEval's MRPC (sklearn's f1_score)."""
    from sklearn.metrics import f1_score

    return float(round(100 * f1_score(np.asarray(y_true), np.asarray(y_pred), zero_division=0), 2))


def valid_score(value: float, what: str) -> float:
    if value is None or not math.isfinite(value):
        raise SentEvalConfigError(f"{what}: the score is not a number")
    return float(value)


Vectors = Dict[str, np.ndarray]
Split = Tuple[List[str], np.ndarray]


class one_thread:
    """torch on one CPU thread inside (restored after): SentEval's classifiers train on batches of
    64 or 128 vectors, too small for threads to help; on a busy machine they slow it 10-30 times."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)


def run_protocol(protocol: str, splits, nclasses: int, cfg: ClassifierConfig, *, noreg: bool = False,
                 f1: bool = False) -> Dict[str, object]:
    """One task's scores from its feature matrices: ``splits[name] = (features, labels)``, in
    SentEval's order. ``protocol``: 'innerkfold' (splits 'all'), 'kfold' ('train', 'test') or
    'split' ('train', 'dev', 'test'). Trains on one CPU thread (:class:`one_thread`)."""
    with one_thread():
        return _run_protocol(protocol, splits, nclasses, cfg, noreg=noreg, f1=f1)


def _run_protocol(protocol, splits, nclasses, cfg, *, noreg, f1):
    if protocol == "innerkfold":
        x, y = splits["all"]
        out = inner_kfold(x, y, nclasses, cfg)
        out.update(ndev=len(y), ntest=len(y))
    elif protocol == "kfold":
        out = kfold(*splits["train"], *splits["test"], nclasses, cfg)
        yhat = out.pop("yhat")
        if f1:
            out["f1"] = f1_binary(splits["test"][1], yhat)
        out.update(ndev=len(splits["train"][1]), ntest=len(splits["test"][1]))
    elif protocol == "split":
        out = split(splits["train"], splits["dev"], splits["test"], nclasses, cfg, noreg=noreg)
        out.update(ndev=len(splits["dev"][1]), ntest=len(splits["test"][1]))
    else:
        raise ValueError(f"unknown protocol {protocol!r}")
    return out


def config_for(task_protocol: Optional[dict], cfg: ClassifierConfig) -> ClassifierConfig:
    """A task's own changes to the classifier config (SNLI: 15 epochs of 1 pass; WordContent: no MLP)."""
    return replace(cfg, **task_protocol) if task_protocol else cfg
