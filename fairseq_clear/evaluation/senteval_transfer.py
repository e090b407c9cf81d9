"""SentEval's transfer and probing evaluation for any encoder: DeCLUTR's Table 1.

:func:`evaluate_transfer` embeds each task's sentences with each encoder (an
:data:`~.sts_eval.Encoder`, as clear-eval-sts uses: one label per pooling of a checkpoint, or
one for a sentence-transformers / Hugging Face directory or a callable), puts them in SentEval's
order, builds SentEval's features and scores them with SentEval's classifier protocol
(:mod:`.senteval_classifier`) or, for SICK-R and STS-B, its regressor
(:mod:`.senteval_relatedness`). Vectors are cached per (model, task) (:class:`VectorCache`),
so that another classifier setting does not embed again.

Each task's score is the one DeCLUTR's table uses (its ``scripts/run_senteval.py``): SentEval's
test accuracy x100; for MRPC the mean of accuracy and F1; for SICK-R and STS-B the test Spearman
x100 of SentEval's regressor; for STS12-16 (no training) the mean over the year's subsets of the
Spearman x100 of the cosine similarities (SentEval's ``all.spearman.mean``). Every other number
SentEval prints (Pearson, F1, dev scores, per-subset and weighted means) is in the results. The
table adds DeCLUTR's averages: the mean over its downstream tasks run (SNLI, which it leaves out,
is reported but not averaged), over the probing tasks run, and ``Avg`` the mean of those two.
"""

import hashlib
import logging
import os
import re
import time
from typing import Callable, Dict, List, Optional

import numpy as np

from . import senteval_classifier as sc
from .senteval_data import DOWNSTREAM, PROBING, SNLI_LABELS, TaskData

logger = logging.getLogger(__name__)


def _check_vectors(task: str, label: str, vectors, n: int) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2 or v.shape[0] != n:
        raise sc.SentEvalConfigError(f"{task}: encoder '{label}' returned an array of shape {v.shape} "
                                     f"for {n} sentences")
    sc.check_finite(f"{task}: encoder '{label}'", v)
    return v


def score_task(data: TaskData, vectors: np.ndarray, index: Dict[str, int], cfg: sc.ClassifierConfig) -> dict:
    """One task's SentEval result from the vectors of its sentences (``vectors[index[s]]``)."""
    from .senteval_relatedness import evaluate_relatedness

    def rows(sentences):
        return vectors[np.fromiter((index[s] for s in sentences), dtype=np.int64, count=len(sentences))]

    if data.protocol == "cosine":  # STS12-16: SentEval's STSEval, nothing trained
        from .sts import StsPairs, score_pairs

        a, b, y = data.splits["test"]
        u, v = rows(a), rows(b)
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero vector: NaN, as SentEval's cosine
            cos = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
        out = score_pairs(StsPairs(data.name, a, b, np.asarray(y, dtype=np.float64), subsets=data.subsets), cos)
        out = {"spearman_mean": out["mean"], "spearman_wmean": out["wmean"], "pearson_mean": out["pearson_mean"],
               "pearson_wmean": out["pearson_wmean"], "spearman_all": out["spearman"],
               "subsets": out["subsets"], "ntest": out["pairs"]}
        out["score"] = sc.valid_score(out["spearman_mean"], data.name)
        return out
    if data.protocol == "relatedness":
        splits = {k: (rows(a), rows(b), y, a, b) for k, (a, b, y) in data.splits.items()}
        with sc.one_thread():
            out = evaluate_relatedness(splits, seed=cfg.seed)
        out = {"pearson": out["pearson"], "spearman": out["spearman"], "mse": out["mse"],
               "devpearson": out["dev_pearson"], "epochs": out["epochs"],
               "ndev": out["dev_pairs"], "ntest": out["test_pairs"]}
        out["score"] = sc.valid_score(out["spearman"], data.name)  # DeCLUTR's test score: Spearman
        return out
    features = {}
    for split, columns in data.splits.items():
        if data.pair:
            a, b, y = columns
            if data.features == "snli":  # SentEval sorts SNLI by (s2, s1, label text)
                order = sc.sort_pairs(b, a, y)
                y = np.array([SNLI_LABELS[t] for t in y], dtype=np.int64)
            else:
                order = sc.sort_pairs(a, b, y)
            x = sc.pair_features(rows([a[i] for i in order]), rows([b[i] for i in order]), data.features)
        else:
            s, y = columns
            order = sc.sort_single(s, y)
            x = rows([s[i] for i in order])
        features[split] = (x, np.asarray(y, dtype=np.int64)[order])
    out = sc.run_protocol(data.protocol, features, data.nclasses, sc.config_for(data.classifier, cfg),
                          noreg=data.noreg, f1=data.f1)
    # MRPC: DeCLUTR averages accuracy and F1
    out["score"] = sc.valid_score((out["acc"] + out["f1"]) / 2 if data.f1 else out["acc"], data.name)
    return out


def table_of(scores: Dict[str, float]) -> Dict[str, float]:
    """Per task, then 'Downstream' and 'Probing' (means over the tasks run) and 'Avg' (their mean)."""
    table = dict(scores)
    averages = {}
    for group, names in (("Downstream", DOWNSTREAM), ("Probing", PROBING)):
        values = [scores[t] for t in names if t in scores]
        if values:
            averages[group] = float(np.mean(values))
    table.update(averages)
    if averages:
        table["Avg"] = float(np.mean(list(averages.values())))
    return table


class VectorCache:
    """Sentence vectors on disk, one .npz per (model, task) holding every label (pooling) of the
    model, keyed by the model's fingerprint and a digest of the task's sentences: anything else
    is a miss (and is overwritten)."""

    def __init__(self, directory: str):
        self.directory = directory

    @staticmethod
    def digest(sentences: List[str]) -> str:
        h = hashlib.sha256()
        for s in sentences:
            h.update(s.encode("utf-8", "surrogatepass"))
            h.update(b"\n")
        return h.hexdigest()

    def path(self, model: str, task: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:100] + "-" + hashlib.sha1(model.encode()).hexdigest()[:8]
        return os.path.join(self.directory, slug, f"{task}.npz")

    def get(self, model: str, task: str, fingerprint: str, digest: str) -> Optional[Dict[str, np.ndarray]]:
        path = self.path(model, task)
        if not os.path.isfile(path):
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["fingerprint"]) != fingerprint or str(z["digest"]) != digest:
                    return None
                return {k[len("vectors:"):]: z[k] for k in z.files if k.startswith("vectors:")} or None
        except (OSError, ValueError, KeyError, EOFError) as e:  # damaged: embed again, and overwrite it
            logger.warning("vector cache %s unreadable (%s): embedding again", path, e)
            return None

    def put(self, model: str, task: str, fingerprint: str, digest: str, vectors: Dict[str, np.ndarray]):
        path = self.path(model, task)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}.npz"
        arrays = {f"vectors:{label}": np.asarray(v, dtype=np.float32) for label, v in vectors.items()}
        np.savez(tmp, fingerprint=np.str_(fingerprint), digest=np.str_(digest), **arrays)
        os.replace(tmp, path)


def evaluate_transfer(encoders: Dict[str, Callable], tasks: Dict[str, TaskData], cfg: sc.ClassifierConfig,
                      cache: Optional[VectorCache] = None, fingerprints: Optional[Dict[str, str]] = None,
                      progress: Callable[[str], None] = logger.info) -> Dict[str, Dict[str, dict]]:
    """``{model: {label: {'table', 'tasks', 'times'}}}`` for the encoders on the tasks.

    ``encoders``: ``{model name: Encoder}`` (``sentences -> {label: (N, dim) array}``);
    ``fingerprints``: ``{model name: str}`` identifying each model's weights for the cache
    (a model without one is never cached)."""
    fingerprints = fingerprints or {}
    results = {m: {} for m in encoders}
    total = len(tasks)
    for number, (name, data) in enumerate(tasks.items(), 1):
        sentences = data.sentences()
        index = {s: k for k, s in enumerate(sentences)}
        digest = VectorCache.digest(sentences)
        sizes = ", ".join(f"{k} {v}" for k, v in data.sizes().items())
        for model, encoder in encoders.items():
            start = time.time()
            fingerprint = fingerprints.get(model)
            vectors = cache.get(model, name, fingerprint, digest) if cache and fingerprint else None
            cached = vectors is not None
            if not cached:
                vectors = encoder(sentences)
                if not isinstance(vectors, dict):
                    vectors = {"callable": vectors}
                vectors = {label: _check_vectors(name, label, v, len(sentences)) for label, v in vectors.items()}
                if cache and fingerprint:
                    cache.put(model, name, fingerprint, digest, vectors)
            embed_s = time.time() - start
            progress(f"[{number}/{total}] {name} ({sizes}): {model}: {len(sentences)} sentences "
                     + ("from the vector cache" if cached else f"embedded in {embed_s:.1f} s"))
            for label, v in vectors.items():
                start = time.time()
                out = score_task(data, v, index, cfg)
                classify_s = time.time() - start
                entry = results[model].setdefault(label, {"tasks": {}, "times": {}})
                entry["tasks"][name] = {**out, "source": data.source, **({"note": data.note} if data.note else {})}
                entry["times"][name] = {"embed_s": round(embed_s, 3), "classify_s": round(classify_s, 3),
                                        "cached": cached}
                method = {"relatedness": "regressor", "cosine": "cosine"}.get(data.protocol, data.protocol)
                progress(f"[{number}/{total}] {name}: {model}-{label}: {_describe(out)} ({method} in {classify_s:.1f} s)")
    for model in results.values():
        for entry in model.values():
            entry["table"] = table_of({t: r["score"] for t, r in entry["tasks"].items()})
    return results


def _describe(out: dict) -> str:
    if "spearman_mean" in out:
        return f"spearman mean {out['spearman_mean']:.2f} wmean {out['spearman_wmean']:.2f} ({len(out['subsets'])} subsets)"
    if "pearson" in out:
        return f"pearson {out['pearson']:.2f} spearman {out['spearman']:.2f} (dev pearson {out['devpearson']:.2f})"
    extra = f" f1 {out['f1']:.2f}" if "f1" in out else ""
    return f"acc {out['acc']:.2f}{extra} (dev {out['devacc']:.2f})"
