"""Hard-negative mining: (anchor, positive) pairs -> (anchor, positive, negative) rows.

The rules are sentence-transformers' ``util.mine_hard_negatives`` (v6.2), on fairseq-clear's
search index (:class:`fairseq_clear.search.EmbeddingIndex`):

* the corpus is the positives (deduplicated), or ``corpus`` plus the positives;
* each distinct anchor is a query; its positives (every pair it has) are never negatives, and
  neither is its own text (unlike sentence-transformers, which takes the anchor first when the
  corpus holds it: an anchor is no hard negative of itself);
* ``range_max`` defaults to sentence-transformers' ``range_min + num_negatives + max_positives``
  (``num_negatives * 10`` when a margin or ``max_score`` may remove candidates), ``max_positives``
  the most pairs an anchor has, counted as sentence-transformers counts them (a repeated pair
  twice); the ``range_max + max_positives`` best corpus entries of each query are retrieved, one
  more for an anchor whose own text is in the corpus (it is removed, so the window holds as many
  other texts as sentence-transformers' would);
* a candidate is removed when ``score + absolute_margin > sim(anchor, positive)`` (``absolute_margin``), when
  ``score > sim(anchor, positive) - |sim(anchor, positive)|·relative_margin`` (``relative_margin``;
  with several positives the smallest of their scores counts), above ``max_score`` or below
  ``min_score``;
* of the candidates left, best first, the first ``range_min`` are skipped and those up to rank
  ``range_max`` are the options; ``num_negatives`` of them are taken: the best (``top``) or at
  random (``random``, seeded);
* every distinct (anchor, positive) pair gets one row per negative of its anchor, grouped by
  anchor in the order the anchors first appear (sentence-transformers' ``triplet`` format and
  order): the ``sent0,sent1,hard_neg`` csv that ``clear-prepare-pairs`` reads. A repeated input
  pair is written once (counted as ``duplicate_pairs``); a pair whose anchor has no negative left
  is counted, not written.

Large corpora: the texts are embedded ``chunk_size`` at a time and the vectors written to disk
(numpy memory maps in ``work_dir``); the search runs corpus chunk by corpus chunk, merging the best
candidates of each query, so memory holds one chunk of vectors and the texts, with a progress bar
(a progress line every ``preprocessing.common.PROGRESS_LOG_SECONDS`` in a log). The files' space is
claimed before the first vector is written: a full ``work_dir`` is one :class:`DiskFullError`, not a
"Bus error" from a memory map that cannot be backed.
"""

import collections
import csv
import logging
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from .errors import FairseqClearError
from .atomic_files import atomic_write, remove_stale_tmp, tmp_prefix
from .preprocessing.common import DISK_FULL, DiskFullError, LoggedProgress, allocate
from .search import EmbeddingIndex

logger = logging.getLogger(__name__)

SAMPLING = ("top", "random")


class MiningError(FairseqClearError, ValueError):
    """A mining option or input that cannot work; the message names it."""


@dataclass
class MiningRules:
    """sentence-transformers' ``mine_hard_negatives`` options (its defaults)."""

    num_negatives: int = 3
    range_min: int = 0
    range_max: Optional[int] = None
    max_score: Optional[float] = None
    min_score: Optional[float] = None
    absolute_margin: Optional[float] = None
    relative_margin: Optional[float] = None
    sampling_strategy: str = "top"
    seed: int = 12

    def check(self) -> None:
        if self.num_negatives < 1:
            raise MiningError(f"--num-negatives must be >= 1, got {self.num_negatives}")
        if self.range_min < 0:
            raise MiningError(f"--range-min must be >= 0, got {self.range_min}")
        for flag, value in (("--max-score", self.max_score), ("--min-score", self.min_score),
                            ("--absolute-margin", self.absolute_margin), ("--relative-margin", self.relative_margin)):
            if value is not None and not math.isfinite(value):
                raise MiningError(f"{flag} must be finite, got {value}")
        if self.seed < 0:  # numpy's generators take no negative seed
            raise MiningError(f"--seed must be >= 0, got {self.seed}")
        if self.sampling_strategy not in SAMPLING:
            raise MiningError(f"--sampling-strategy must be one of {', '.join(SAMPLING)}, got {self.sampling_strategy!r}")
        if self.range_max is not None:
            if self.range_max <= self.range_min:
                raise MiningError(f"--range-max ({self.range_max}) must be larger than --range-min ({self.range_min})")
            if self.num_negatives > self.range_max - self.range_min:
                raise MiningError(f"--num-negatives {self.num_negatives} does not fit the ranks --range-min "
                                  f"{self.range_min} to --range-max {self.range_max}")

    def resolved_range_max(self, max_positives: int) -> int:
        """sentence-transformers' default: room for the anchor's positives and the negatives, ten times
        the negatives when a rule may remove some."""
        if self.range_max is not None:
            return self.range_max
        filtering = any(v is not None for v in (self.absolute_margin, self.relative_margin, self.max_score))
        return self.range_min + self.num_negatives * (10 if filtering else 1) + max_positives


@dataclass
class MiningResult:
    rows: List[tuple] = field(default_factory=list)  # (anchor, positive, negative, positive score, negative score)
    counts: Dict[str, int] = field(default_factory=dict)
    positive_scores: List[float] = field(default_factory=list)
    negative_scores: List[float] = field(default_factory=list)
    range_max: int = 0


def _vectors_to_disk(encode, texts: Sequence[str], chunk_size: int, open_out, what: str) -> np.memmap:
    """``encode`` the texts ``chunk_size`` at a time into ``open_out(dim)``, a float32 memory map
    of one row per text."""
    out = None
    with LoggedProgress(len(texts), f"embedding {what}", "texts", logger) as bar:
        for start in range(0, len(texts), chunk_size):
            v = np.asarray(encode(list(texts[start:start + chunk_size])), dtype=np.float32)
            if v.ndim != 2 or v.shape[0] != min(chunk_size, len(texts) - start):
                raise MiningError(f"the encoder returned vectors of shape {v.shape} for {what}")
            if not np.isfinite(v).all():
                raise MiningError(f"the encoder returned NaN/Inf vectors for {what}; they cannot be ranked")
            out = open_out(v.shape[1]) if out is None else out
            if v.shape[1] != out.shape[1]:  # the file's width came from the first vectors, maybe the anchors'
                raise MiningError(f"the encoder returned vectors of shape {v.shape} for {what}, "
                                  f"{out.shape[1]} columns before")
            out[start:start + len(v)] = v
            bar.update(len(v))
    out.flush()
    return out


def _npy_on_disk(path: str, rows: int, dim: int) -> np.memmap:
    """A float32 .npy memory map of ``rows`` x ``dim`` whose space is claimed now (see allocate)."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
              "shape": (rows, dim)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.flush()
        allocate(f.fileno(), f.tell(), rows * dim * 4)
    return np.lib.format.open_memmap(path, mode="r+")


def _unit(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.float64)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def mine(pairs: Sequence[tuple], encode: Callable[[List[str]], np.ndarray], rules: MiningRules,
         corpus: Optional[Sequence[str]] = None, chunk_size: int = 10000, work_dir: Optional[str] = None,
         backend: str = "torch") -> MiningResult:
    """Mine hard negatives for ``pairs`` ((anchor, positive), ...) with ``encode`` (texts -> vectors);
    see the module docstring for the rules."""
    rules.check()
    if chunk_size < 1:
        raise MiningError(f"--chunk-size must be >= 1, got {chunk_size}")
    if not pairs:
        raise MiningError("no (anchor, positive) pairs to mine negatives for")
    texts = list(dict.fromkeys(list(corpus or []) + [p for _, p in pairs]))  # deduplicated, positives included
    corpus_id = {t: i for i, t in enumerate(texts)}
    queries = list(dict.fromkeys(a for a, _ in pairs))
    query_id = {q: i for i, q in enumerate(queries)}
    positives = [[] for _ in queries]
    for a, p in pairs:
        if corpus_id[p] not in positives[query_id[a]]:
            positives[query_id[a]].append(corpus_id[p])
    # sentence-transformers counts every pair of an anchor, a repeated one included
    max_positives = max(collections.Counter(a for a, _ in pairs).values())
    range_max = rules.resolved_range_max(max_positives)
    window = range_max + max_positives  # sentence-transformers' retrieval count
    anchor_in_corpus = np.array([q in corpus_id for q in queries], dtype=bool)
    k = min(window + int(anchor_in_corpus.any()), len(texts))  # + 1 where the anchor itself is removed

    files = {}

    def open_files(dim):
        """Both files at once, when the first vector gives their width: a work dir too small for
        them fails before the corpus is embedded."""
        try:
            for name, rows in (("anchors", len(queries)), ("corpus", len(texts))):
                files[name] = _npy_on_disk(os.path.join(tmp, f"{name}.npy"), rows, dim)
        except OSError as e:
            if e.errno not in DISK_FULL:
                raise
            option = "--work-dir" if work_dir else "--work-dir (default: the temporary directory)"
            raise DiskFullError(work_dir or tempfile.gettempdir(), (len(queries) + len(texts)) * dim * 4,
                                "the vectors wait there: give --work-dir a directory with more room", option) from None
        return files["anchors"]

    # removed on every way out, an error included (the memory maps are only unlinked files then); a
    # killed run's, under the one temporary name, by the next run
    where = work_dir or tempfile.gettempdir()
    remove_stale_tmp(where, ["clear-mine"], own=False)
    with tempfile.TemporaryDirectory(dir=where, prefix=tmp_prefix(os.path.join(where, "clear-mine"))) as tmp:
        qv = _vectors_to_disk(encode, queries, chunk_size, open_files, "anchors")
        cv = _vectors_to_disk(encode, texts, chunk_size, lambda dim: files["corpus"], "corpus")
        best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
        best_i = np.zeros((len(queries), 0), dtype=np.int64)
        bar = LoggedProgress(len(texts), "searching", "corpus texts", logger)
        for start in range(0, len(texts), chunk_size):
            index = EmbeddingIndex(backend=backend).add(np.asarray(cv[start:start + chunk_size]))
            s = np.full((len(queries), min(k, len(index))), -np.inf, dtype=np.float32)
            ids = np.zeros(s.shape, dtype=np.int64)
            for qs in range(0, len(queries), chunk_size):
                for r, hits in enumerate(index.search(np.asarray(qv[qs:qs + chunk_size]), top_k=s.shape[1])):
                    s[qs + r, :len(hits)] = [h["score"] for h in hits]
                    ids[qs + r, :len(hits)] = [h["corpus_id"] + start for h in hits]
            best_s, best_i = np.concatenate([best_s, s], 1), np.concatenate([best_i, ids], 1)
            order = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
            best_s, best_i = np.take_along_axis(best_s, order, 1), np.take_along_axis(best_i, order, 1)
            bar.update(len(index))
        bar.close()
        best_s[~anchor_in_corpus, window:] = -np.inf  # the extra candidate only where the anchor takes a place
        # the positives' scores: the anchor against the positive's corpus vector
        pos_scores = [[float(_unit(qv[q:q + 1]) @ _unit(cv[c:c + 1]).T) for c in positives[q]]
                      for q in range(len(queries))]

    distinct = sum(len(p) for p in positives)
    counts = {"pairs": len(pairs), "duplicate_pairs": len(pairs) - distinct, "anchors": len(queries),
              "corpus": len(texts), "retrieved": int(np.isfinite(best_s).sum())}
    scores = best_s.astype(np.float64)
    own = np.array([[c in positives[q] for c in row] for q, row in enumerate(best_i)], dtype=bool).reshape(scores.shape)
    itself = np.array([[texts[c] == queries[q] for c in row] for q, row in enumerate(best_i)],
                      dtype=bool).reshape(scores.shape)

    def remove(name, where):
        where = where & np.isfinite(scores)
        counts[f"removed_{name}"] = int(where.sum())
        scores[where] = -np.inf

    remove("positive", own)
    remove("anchor_itself", itself)
    threshold = np.array([min(p) for p in pos_scores])[:, None]
    if rules.absolute_margin is not None:
        remove("absolute_margin", scores + rules.absolute_margin > threshold)
    if rules.relative_margin is not None:
        remove("relative_margin", scores > threshold - np.abs(threshold) * rules.relative_margin)
    if rules.max_score is not None:
        remove("max_score", scores > rules.max_score)
    if rules.min_score is not None:
        remove("min_score", scores < rules.min_score)
    # the remaining candidates, best first (removed ones last), then ranks range_min .. range_max
    order = np.argsort(-scores, axis=1, kind="stable")[:, :range_max]
    scores, ids = np.take_along_axis(scores, order, 1), np.take_along_axis(best_i, order, 1)
    scores, ids = scores[:, rules.range_min:], ids[:, rules.range_min:]
    rng = np.random.default_rng(rules.seed)
    result = MiningResult(counts=counts, range_max=range_max)
    chosen = []
    for q in range(len(queries)):
        valid = np.flatnonzero(np.isfinite(scores[q]))
        if rules.sampling_strategy == "random" and len(valid) > rules.num_negatives:
            valid = np.sort(rng.choice(valid, size=rules.num_negatives, replace=False))
        chosen.append([(int(ids[q, j]), float(scores[q, j])) for j in valid[:rules.num_negatives]])
    short = without = 0
    for q, a in enumerate(queries):  # each distinct pair once, grouped by anchor
        for c, ps in zip(positives[q], pos_scores[q]):
            result.positive_scores.append(ps)
            short += len(chosen[q]) < rules.num_negatives
            without += not chosen[q]
            for n, s in chosen[q]:
                result.rows.append((a, texts[c], texts[n], ps, s))
                result.negative_scores.append(s)
    counts["pairs_without_negative"] = without
    counts["pairs_with_fewer_negatives"] = short
    counts["rows_written"] = len(result.rows)
    return result


def write_rows(result: MiningResult, path: str) -> None:
    """The ``sent0,sent1,hard_neg`` csv (SimCSE's NLI layout) that ``clear-prepare-pairs`` reads;
    written to a temporary sibling and renamed."""
    with atomic_write(path) as f:
        w = csv.writer(f)
        w.writerow(["sent0", "sent1", "hard_neg"])
        w.writerows(row[:3] for row in result.rows)


def histogram(result: MiningResult, bins: int = 40) -> dict:
    edges = np.linspace(-1.0, 1.0, bins + 1)
    return {"edges": [round(float(e), 4) for e in edges],
            "positive": np.histogram(np.clip(result.positive_scores, -1, 1), edges)[0].tolist(),
            "negative": np.histogram(np.clip(result.negative_scores, -1, 1), edges)[0].tolist()}


def summary(result: MiningResult, rules: MiningRules, extra: dict) -> dict:
    def stats(x):
        return {"mean": float(np.mean(x)), "min": float(np.min(x)), "max": float(np.max(x))} if len(x) else None

    return {**extra, "rules": {**asdict(rules), "range_max": result.range_max}, "counts": result.counts,
            "positive_scores": stats(result.positive_scores), "negative_scores": stats(result.negative_scores),
            "histogram": histogram(result)}


def plot(result: MiningResult, path: str) -> Optional[str]:
    """A histogram of the positives' and the chosen negatives' similarities (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    edges = np.linspace(-1, 1, 81)
    ax.hist(result.positive_scores, bins=edges, alpha=0.6, label=f"anchor-positive ({len(result.positive_scores)})")
    ax.hist(result.negative_scores, bins=edges, alpha=0.6, label=f"anchor-mined negative ({len(result.negative_scores)})")
    ax.set_xlabel("cosine similarity")
    ax.set_ylabel("count")
    ax.legend()
    fig.tight_layout()
    try:
        with atomic_write(path, "wb") as f:
            fig.savefig(f, format=os.path.splitext(path)[1][1:].lower() or "png", dpi=110)
    finally:
        plt.close(fig)
    return path
