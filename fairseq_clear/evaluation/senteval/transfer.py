"""SentEval's transfer and probing evaluation for any encoder: DeCLUTR's Table 1.

:func:`evaluate_transfer` embeds each task's sentences with each encoder (an
:data:`~..sts.scoring.Encoder`, as clear-eval-sts uses: one label per pooling of a checkpoint, or
one for a sentence-transformers / Hugging Face directory or a callable), puts them in SentEval's
order, builds SentEval's features and scores them with SentEval's classifier protocol
(:mod:`.classifier`) or, for SICK-R and STS-B, its regressor
(:mod:`..sts.relatedness`). Vectors are cached per (model, task) (:class:`VectorCache`),
so that another classifier setting does not embed again: an entry is keyed by everything that
changes the vectors, holds exactly the labels (poolings) asked for, is checked against its
SHA-256 before use, and the cache is kept under a size bound (least recently used out first).

Each task's score is the one DeCLUTR's table uses (its ``scripts/run_senteval.py``): SentEval's
test accuracy x100; for MRPC the mean of accuracy and F1; for SICK-R and STS-B the test Spearman
x100 of SentEval's regressor; for STS12-16 (no training) the mean over the year's subsets of the
Spearman x100 of the cosine similarities (SentEval's ``all.spearman.mean``). Every other number
SentEval prints (Pearson, F1, dev scores, per-subset and weighted means) is in the results. The
table adds DeCLUTR's averages (:func:`table_of`): ``Downstream`` the mean over its 18 downstream
tasks (SNLI and image-caption retrieval included), ``Probing`` over the 10 probing tasks, ``Avg``
the mean of those two (its Table 1); each over the tasks that were scored, and :func:`coverage`
says which of DeCLUTR's are missing (image-caption retrieval always: not implemented here).
"""

import hashlib
import json
import logging
import os
import re
import stat
import time
import zipfile
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ...atomic_files import TEMP_NAME, atomic_write, remove_stale_tmp
from ...vocabulary import sha256
from . import classifier as sc
from .data import DECLUTR_DOWNSTREAM, NOT_IMPLEMENTED, PROBING, SNLI_LABELS, TaskData

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
    from ..sts.relatedness import evaluate_relatedness

    def rows(sentences):
        return vectors[np.fromiter((index[s] for s in sentences), dtype=np.int64, count=len(sentences))]

    if data.protocol == "cosine":  # STS12-16: SentEval's STSEval, nothing trained
        from ...preprocessing.sts_readers import StsPairs, score_pairs

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


#: DeCLUTR's averages and the tasks each is over
AVERAGED = {"Downstream": DECLUTR_DOWNSTREAM, "Probing": PROBING}


def table_of(scores: Dict[str, float]) -> Dict[str, float]:
    """Per task, then DeCLUTR's 'Downstream' and 'Probing' (the means over its tasks that are in
    ``scores``) and 'Avg' (their mean, as its Table 1). Over fewer tasks than DeCLUTR's, a mean is
    not its number: :func:`coverage` says which are missing."""
    table = dict(scores)
    averages = {}
    for group, names in AVERAGED.items():
        values = [scores[t] for t in names if t in scores]
        if values:
            averages[group] = float(np.mean(values))
    table.update(averages)
    if averages:
        table["Avg"] = float(np.mean(list(averages.values())))
    return table


def coverage(tasks: Sequence[str], reasons: Optional[Dict[str, str]] = None) -> Dict[str, dict]:
    """Which of DeCLUTR's tasks each average of :func:`table_of` is over, for the ``tasks`` scored:
    ``{group: {'tasks', 'of', 'missing': {task: why}, 'complete'}}``; ``reasons`` says why a task is
    missing (default 'not run'; a task not implemented here says so). 'Avg' is complete when both are."""
    out = {}
    for group, names in AVERAGED.items():
        why = {t: NOT_IMPLEMENTED.get(t) or (reasons or {}).get(t, "not run") for t in names if t not in tasks}
        out[group] = {"tasks": [t for t in tasks if t in names], "of": len(names), "missing": why,
                      "complete": not why}
    out["Avg"] = {"complete": all(g["complete"] for g in out.values())}
    return out


class VectorCache:
    """Sentence vectors on disk: one entry per (model, task, key), where the key digests the model's
    fingerprint (the caller's: everything that changes its vectors), the task's sentences and the
    labels (poolings) asked for, so an entry holds exactly what its request needs.

    An entry is ``MODEL-SLUG/TASK-KEY.npz`` and its SHA-256 beside it (``.npz.sha256``, written
    after it, each atomically): one that fails the check (truncated, a flipped bit, an interrupted
    write) is named in one warning, removed and embedded again. Beyond ``max_bytes`` the least
    recently used entries (a hit counts as a use) are removed; only files named as entries are
    ever counted or removed, in folders named as the cache names them. ``max_bytes`` 0 keeps none.
    """

    FORMAT = 2  # part of every key: entries of another layout are never read
    SLUG = re.compile(r"^[A-Za-z0-9._-]{1,100}-[0-9a-f]{8}$")
    ENTRY = re.compile(r"^[A-Za-z0-9-]+-[0-9a-f]{24}\.npz$")
    CHECKSUM = ".sha256"

    def __init__(self, directory: str, max_bytes: int = 20 * 10 ** 9):
        self.directory, self.max_bytes = directory, max_bytes

    @staticmethod
    def digest(sentences: List[str]) -> str:
        h = hashlib.sha256()
        for s in sentences:
            h.update(s.encode("utf-8", "surrogatepass"))
            h.update(b"\n")
        return h.hexdigest()

    @classmethod
    def key(cls, fingerprint: str, task: str, digest: str, labels: Optional[Sequence[str]] = None) -> str:
        blob = json.dumps([cls.FORMAT, fingerprint, task, digest, None if labels is None else sorted(set(labels))])
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def path(self, model: str, task: str, key: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:100] + "-" + hashlib.sha1(model.encode()).hexdigest()[:8]
        return os.path.join(self.directory, slug, f"{re.sub(r'[^A-Za-z0-9-]+', '-', task)}-{key}.npz")

    def get(self, model: str, task: str, fingerprint: str, digest: str,
            labels: Optional[Sequence[str]] = None) -> Optional[Dict[str, np.ndarray]]:
        """The entry's vectors by label, or None (a miss; a damaged entry is removed with a warning)."""
        path = self.path(model, task, self.key(fingerprint, task, digest, labels))
        if not os.path.isfile(path):
            return None
        problem, vectors = self._check(path), None
        if not problem:
            try:
                with np.load(path, allow_pickle=False) as z:
                    stored = (str(z["fingerprint"]), str(z["digest"]))
                    vectors = {k[len("vectors:"):]: z[k] for k in z.files if k.startswith("vectors:")}
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
                problem = f"is unreadable ({type(e).__name__}: {e})"
            else:
                if stored != (fingerprint, digest) or not vectors:
                    problem = "holds another model's or task's vectors"
                elif labels is not None and set(vectors) != set(labels):
                    problem = f"holds {', '.join(sorted(vectors))}, not {', '.join(sorted(set(labels)))}"
        if problem:
            logger.warning("vector cache entry %s %s: removed, embedding again", path, problem)
            self._remove(path)
            return None
        try:
            os.utime(path)  # its last use, which pruning goes by
        except OSError:  # removed by another run meanwhile, or a read-only cache: still a hit
            pass
        return vectors

    def _check(self, path: str) -> str:
        """Why the entry at ``path`` is not the one that was written ("" when it is)."""
        try:
            with open(path + self.CHECKSUM, encoding="utf-8") as f:
                expected, size = f.read().split()
            size = int(size)
        except (OSError, ValueError):
            return "has no readable checksum (an interrupted write?)"
        try:
            actual = os.path.getsize(path)
            if actual != size:
                return f"has {actual} bytes, not the {size} written (truncated?)"
            return "" if sha256(path) == expected else "fails its SHA-256 checksum (damaged)"
        except OSError as e:
            return f"is unreadable ({e.strerror or e})"

    def put(self, model: str, task: str, fingerprint: str, digest: str, vectors: Dict[str, np.ndarray],
            labels: Optional[Sequence[str]] = None):
        if self.max_bytes <= 0:
            return  # a bound of 0 keeps nothing
        path = self.path(model, task, self.key(fingerprint, task, digest, labels))
        arrays = {f"vectors:{label}": np.asarray(v, dtype=np.float32) for label, v in vectors.items()}
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with atomic_write(path, "wb") as f:
                np.savez(f, fingerprint=np.str_(fingerprint), digest=np.str_(digest), **arrays)
            with atomic_write(path + self.CHECKSUM) as f:
                f.write(f"{sha256(path)} {os.path.getsize(path)}\n")
        except OSError as e:  # a full disk: the vectors are in hand, the run goes on without this entry
            logger.warning("vector cache entry %s not written (%s): the run goes on", path, e.strerror or e)
            return
        self.prune(keep=(path,))

    def entries(self) -> List[tuple]:
        """(last use in ns, bytes, path) of every entry; a checksum left without its entry is removed."""
        out = []
        if not os.path.isdir(self.directory):
            return out
        for slug in sorted(os.listdir(self.directory)):
            folder = os.path.join(self.directory, slug)
            if not self.SLUG.match(slug) or os.path.islink(folder) or not os.path.isdir(folder):
                continue
            names = os.listdir(folder)
            # atomic_write's temporary names of an entry or of its checksum
            stale = [m.group("target") for m in map(TEMP_NAME.match, names)
                     if m and self.ENTRY.match(m.group("target").removesuffix(self.CHECKSUM))]
            if stale:  # an entry or checksum whose writer died mid-write
                remove_stale_tmp(folder, stale)
            for name in names:
                path = os.path.join(folder, name)
                if name.endswith(self.CHECKSUM) and self.ENTRY.match(name[:-len(self.CHECKSUM)]):
                    if not os.path.lexists(path[:-len(self.CHECKSUM)]):
                        self._remove(path[:-len(self.CHECKSUM)])
                    continue
                if not self.ENTRY.match(name):
                    continue
                try:
                    st = os.lstat(path)
                    size = st.st_size + (os.path.getsize(path + self.CHECKSUM)
                                         if os.path.isfile(path + self.CHECKSUM) else 0)
                except FileNotFoundError:  # removed by another run meanwhile
                    continue
                if stat.S_ISREG(st.st_mode):  # we write files, never links
                    out.append((st.st_mtime_ns, size, path))
        return out

    def prune(self, keep: Sequence[str] = ()) -> List[str]:
        """Remove the least recently used entries until the cache is within ``max_bytes``
        (never those in ``keep``); returns the paths removed."""
        entries = sorted(self.entries())
        total = sum(size for _, size, _ in entries)
        removed, freed = [], 0
        for _, size, path in entries:
            if total - freed <= self.max_bytes:
                break
            if path in keep:
                continue
            self._remove(path)
            removed.append(path)
            freed += size
        if removed:
            logger.info("vector cache %s: removed %d least recently used entries (%.2f GB) to stay within "
                        "%.2f GB", self.directory, len(removed), freed / 1e9, self.max_bytes / 1e9)
        return removed

    def _remove(self, path: str):
        for p in (path, path + self.CHECKSUM):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def evaluate_transfer(encoders: Dict[str, Callable], tasks: Dict[str, TaskData], cfg: sc.ClassifierConfig,
                      cache: Optional[VectorCache] = None, fingerprints: Optional[Dict[str, str]] = None,
                      progress: Callable[[str], None] = logger.info,
                      labels: Optional[Dict[str, Sequence[str]]] = None) -> Dict[str, Dict[str, dict]]:
    """``{model: {label: {'table', 'tasks', 'times'}}}`` for the encoders on the tasks.

    ``encoders``: ``{model name: Encoder}`` (``sentences -> {label: (N, dim) array}``);
    ``fingerprints``: ``{model name: str}`` identifying, for the cache, everything that changes
    each model's vectors (a model without one is never cached); ``labels``: ``{model name:
    the labels its encoder returns}`` where the caller chooses them (a checkpoint's poolings): a
    cache entry serves only that exact set."""
    fingerprints, labels = fingerprints or {}, labels or {}
    results = {m: {} for m in encoders}
    total = len(tasks)
    for number, (name, data) in enumerate(tasks.items(), 1):
        sentences = data.sentences()
        index = {s: k for k, s in enumerate(sentences)}
        digest = VectorCache.digest(sentences)
        sizes = ", ".join(f"{k} {v}" for k, v in data.sizes().items())
        for model, encoder in encoders.items():
            start = time.time()
            fingerprint, wanted = fingerprints.get(model), labels.get(model)
            vectors = cache.get(model, name, fingerprint, digest, wanted) if cache and fingerprint else None
            cached = vectors is not None
            if not cached:
                vectors = encoder(sentences)
                if not isinstance(vectors, dict):
                    vectors = {"callable": vectors}
                vectors = {label: _check_vectors(name, label, v, len(sentences)) for label, v in vectors.items()}
                if cache and fingerprint:
                    cache.put(model, name, fingerprint, digest, vectors, wanted)
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
