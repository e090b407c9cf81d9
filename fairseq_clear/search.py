"""Semantic search over sentence vectors, in sentence-transformers' ``util.semantic_search`` style.

    hits = semantic_search(hub.embed(queries), hub.embed(corpus), top_k=5)
    hits[0][0]  # {'corpus_id': 17, 'score': 0.83}: the best match of the first query

Cosine similarity with torch top-k, chunked over queries and corpus so that
memory stays bounded. :class:`EmbeddingIndex` keeps a corpus for repeated
searches and uses faiss (inner product on unit vectors) when it is installed
and asked for (``backend="faiss"``), or holds quantized vectors (``precision="int8"``, ``"binary"``, ...)
searched in two passes with rescoring.

Every vector goes through :func:`unit_rows`: a vector holding NaN or Inf is refused with an
error naming the argument and its rows (NaN would sort first in a top-k and hide the true
matches), so every score returned is finite.
"""

import numbers
from typing import Dict, List, Optional

import numpy as np
import torch

from .errors import FairseqClearError

#: how many offending row numbers an error message lists
SHOWN_ROWS = 5


class SearchInputError(FairseqClearError, ValueError):
    """Vectors or an argument that a search cannot use; the message names the argument."""


class SearchTypeError(FairseqClearError, TypeError):
    """An argument of the wrong type; the message names the argument and its value."""


def check_count(name: str, value) -> int:
    """``value`` as a positive int, else an error naming ``name`` and the value (bool, float, None refused)."""
    # bool is an int subclass: top_k=True would silently mean 1
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SearchTypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise SearchInputError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def unit_rows(x, name: str = "embeddings") -> torch.Tensor:
    """The rows of ``x`` (numpy, torch or nested lists; 1-D is one row) at unit length, as float32.

    Scale-safe: a row whose squared norm would overflow (float32 rows of 1e30) or underflow
    (1e-30) is first divided by its largest absolute value, so it keeps its direction instead of
    becoming zero; float64 input is normalised in float64 before the cast. A zero row stays zero: its cosine with anything is 0.
    A row holding NaN or Inf raises :class:`SearchInputError` naming ``name``, how many rows and
    the first few row numbers.
    """
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.is_complex() or t.dtype == torch.bool:
            raise SearchTypeError(f"{name} must be real-valued vectors, got a tensor of {t.dtype}")
    else:
        try:
            a = np.asarray(x)
        except (ValueError, TypeError) as e:  # ragged nested lists
            raise SearchTypeError(f"{name} must be vectors of one length: {e}") from None
        if a.dtype.kind not in "iuf":
            raise SearchTypeError(f"{name} must be numeric vectors, got an array of dtype {a.dtype}")
        if a.ndim not in (1, 2):
            raise SearchInputError(f"{name}: vectors must be 1-D or 2-D, got shape {a.shape}")
        t = torch.from_numpy(np.ascontiguousarray(a))
    t = t.double() if t.dtype == torch.float64 else t.float()
    if t.ndim == 1:
        t = t.unsqueeze(0)
    if t.ndim != 2:
        raise SearchInputError(f"{name}: vectors must be 1-D or 2-D, got shape {tuple(t.shape)}")
    if t.size(1) == 0:
        raise SearchInputError(f"{name}: vectors have no components (shape {tuple(t.shape)})")
    norm = torch.linalg.vector_norm(t, dim=1)
    # A finite norm of at least 1e-10 has neither overflowed nor lost precision to underflow
    # (squares below float32's normal range add < d * 1e-38 to a squared norm >= 1e-20); only
    # the other rows (NaN fails both tests) pay for the scale-safe path.
    odd = ~((norm >= 1e-10) & (norm < float("inf")))
    out = t / torch.where(odd, torch.ones_like(norm), norm).unsqueeze(1)
    if odd.any():
        rows = odd.nonzero()[:, 0]
        scale = t[rows].abs().amax(dim=1, keepdim=True)  # NaN and Inf propagate
        bad = rows[~torch.isfinite(scale[:, 0])]
        if len(bad):
            shown = ", ".join(str(i) for i in bad[:SHOWN_ROWS].tolist()) + (", ..." if len(bad) > SHOWN_ROWS else "")
            raise SearchInputError(
                f"{name}: {len(bad)} of {t.size(0)} vectors hold NaN or Inf (rows {shown}); they cannot "
                "be ranked: fix or drop them"
            )
        scaled = t[rows] / torch.where(scale > 0, scale, torch.ones_like(scale))
        out[rows] = torch.nn.functional.normalize(scaled, dim=1)
    return out.float()


def semantic_search(query_embeddings, corpus_embeddings, top_k: int = 10, query_chunk_size: int = 100,
                    corpus_chunk_size: int = 500000) -> List[List[Dict[str, float]]]:
    """For each query, the ``top_k`` corpus entries by cosine similarity, best first.

    One list per query of ``{'corpus_id': int, 'score': float}`` (fewer than ``top_k`` when the
    corpus is smaller), as sentence-transformers' ``util.semantic_search``. Vectors are normalised
    by :func:`unit_rows`: NaN or Inf is refused naming ``query_embeddings`` or
    ``corpus_embeddings``, and a zero vector scores 0.
    """
    top_k = check_count("top_k", top_k)
    query_chunk_size = check_count("query_chunk_size", query_chunk_size)
    corpus_chunk_size = check_count("corpus_chunk_size", corpus_chunk_size)
    q, c = unit_rows(query_embeddings, "query_embeddings"), unit_rows(corpus_embeddings, "corpus_embeddings")
    if q.size(1) != c.size(1):
        raise SearchInputError(f"queries have {q.size(1)}-dimensional vectors but the corpus has {c.size(1)}")
    k = min(top_k, c.size(0))
    results = []
    for qs in range(0, q.size(0), query_chunk_size):
        qb = q[qs: qs + query_chunk_size]
        best_scores = torch.full((qb.size(0), 0), -2.0)
        best_ids = torch.zeros((qb.size(0), 0), dtype=torch.long)
        for cs in range(0, c.size(0), corpus_chunk_size):
            scores = qb @ c[cs: cs + corpus_chunk_size].T
            s, i = scores.topk(min(k, scores.size(1)), dim=1)
            best_scores = torch.cat([best_scores, s], dim=1)
            best_ids = torch.cat([best_ids, i + cs], dim=1)
            best_scores, order = best_scores.topk(min(k, best_scores.size(1)), dim=1)
            best_ids = best_ids.gather(1, order)
        for row_s, row_i in zip(best_scores.tolist(), best_ids.tolist()):
            results.append([{"corpus_id": int(i), "score": float(s)} for s, i in zip(row_s, row_i)])
    return results


class EmbeddingIndex:
    """A corpus of vectors to search repeatedly (``add`` more at any time).

    Vectors are stored at unit length (:func:`unit_rows`); ``add`` refuses a batch holding NaN
    or Inf as a whole, leaving the index as it was.

    ``precision``: ``float32`` (default), or quantized corpus vectors (:mod:`fairseq_clear.quantization`,
    4x smaller for int8/uint8, 32x for binary/ubinary). int8/uint8 use ``ranges`` (2 x dim), by
    default calibrated on the first ``add()`` (the corpus; later batches are clipped to them, as
    sentence-transformers does). A search then runs in two passes, as sentence-transformers'
    ``semantic_search_faiss``/``_usearch``: the query quantized like the corpus finds
    ``top_k * rescore_multiplier`` candidates (scalar codes compared at their buckets' values, binary
    ones by Hamming distance), and the float query rescores them against the candidates' dequantized
    vectors (never the raw codes, whose dimensions have different scales: the bug of
    sentence-transformers PR #4058). Scores are then the query's dot product with the dequantized
    vector (close to their cosine; int8/uint8) or, as in sentence-transformers, the sum of the query's components where the
    candidate's bit is set (binary/ubinary). ``search(..., rescore=False)`` returns the first pass.
    """

    def __init__(self, dim: Optional[int] = None, backend: str = "torch", precision: str = "float32",
                 ranges=None, rescore_multiplier: int = 4):
        from .quantization import check_precision

        if backend not in ("torch", "faiss"):
            raise SearchInputError(f"backend must be 'torch' or 'faiss', got {backend!r}")
        self.precision = check_precision(precision, "precision")
        if backend == "faiss" and precision != "float32":
            raise SearchInputError(f"backend='faiss' holds float32 vectors; precision={precision!r} needs backend='torch'")
        if backend == "faiss":
            try:
                import faiss  # noqa: F401
            except ImportError:
                raise ImportError("backend='faiss' needs the faiss package (pip install faiss-cpu)") from None
        self.backend, self.dim = backend, None if dim is None else check_count("dim", dim)
        self.rescore_multiplier = check_count("rescore_multiplier", rescore_multiplier)
        self.ranges = None
        if ranges is not None:
            self._set_ranges(ranges, np.asarray(ranges).shape[-1] if self.dim is None else self.dim)
        self._vectors = []
        self._faiss = None

    def _set_ranges(self, ranges, dim):
        from .quantization import check_ranges

        if self.precision not in ("int8", "uint8"):
            raise SearchInputError(f"ranges are for precision 'int8' or 'uint8', not {self.precision!r}")
        self.ranges = check_ranges(ranges, dim)

    def __len__(self):
        return sum(len(v) for v in self._vectors)

    def add(self, embeddings) -> "EmbeddingIndex":
        v = unit_rows(embeddings, "embeddings")
        if self.dim is None:
            self.dim = v.size(1)
        if v.size(1) != self.dim:
            raise SearchInputError(f"the index holds {self.dim}-dimensional vectors, got {v.size(1)}")
        if self.precision != "float32":
            from .quantization import calibration_ranges, quantize

            if self.precision in ("int8", "uint8") and self.ranges is None:
                self._set_ranges(calibration_ranges(v.numpy(), "the first vectors added (the calibration)"), self.dim)
            self._vectors.append(torch.from_numpy(quantize(v.numpy(), self.precision, self.ranges)))
            return self
        self._vectors.append(v)
        if self.backend == "faiss":
            import faiss

            if self._faiss is None:
                self._faiss = faiss.IndexFlatIP(self.dim)
            self._faiss.add(v.numpy())
        return self

    def search(self, query_embeddings, top_k: int = 10, rescore: bool = True) -> List[List[Dict[str, float]]]:
        """:func:`semantic_search`'s results for the vectors added so far (ids in order of addition);
        for a quantized index, see the class's docstring."""
        top_k = check_count("top_k", top_k)
        if not len(self):
            raise SearchInputError("the index is empty: add() corpus vectors first")
        q = unit_rows(query_embeddings, "query_embeddings")
        if q.size(1) != self.dim:
            raise SearchInputError(f"the index holds {self.dim}-dimensional vectors, the queries have {q.size(1)}")
        if self.backend == "faiss":
            scores, ids = self._faiss.search(q.numpy(), min(top_k, len(self)))
            return [[{"corpus_id": int(i), "score": float(s)} for s, i in zip(rs, ri)] for rs, ri in zip(scores, ids)]
        if self.precision == "float32":
            return semantic_search(q, torch.cat(self._vectors), top_k)
        return self._quantized_search(q, top_k, rescore)

    def _dequantized(self, codes: torch.Tensor) -> torch.Tensor:
        from .quantization import dequantize

        return torch.from_numpy(dequantize(codes.numpy(), self.precision, self.ranges, self.dim))

    def _quantized_search(self, q: torch.Tensor, top_k: int, rescore: bool, chunk: int = 65536):
        from .quantization import quantize

        codes = torch.cat(self._vectors)
        binary = self.precision in ("binary", "ubinary")
        k = min(top_k * (self.rescore_multiplier if rescore else 1), len(codes))
        # first pass: the query as the index holds it; binary: +-1 per bit, so the dot product
        # is dim - 2 * Hamming distance
        qq = self._dequantized(torch.from_numpy(quantize(q.numpy(), self.precision, self.ranges)))
        qq = 2 * qq - 1 if binary else qq
        best_s, best_i = torch.empty(len(q), 0), torch.empty(len(q), 0, dtype=torch.long)
        for start in range(0, len(codes), chunk):
            c = self._dequantized(codes[start:start + chunk])
            s, i = (qq @ (2 * c - 1 if binary else c).T).topk(min(k, len(c)), dim=1)
            best_s, order = torch.cat([best_s, s], 1).topk(min(k, best_s.size(1) + s.size(1)), dim=1)
            best_i = torch.cat([best_i, i + start], 1).gather(1, order)
        if not rescore:
            return [[{"corpus_id": int(i), "score": float(s / self.dim if binary else s)} for s, i in zip(rs, ri)]
                    for rs, ri in zip(best_s.tolist(), best_i.tolist())]
        candidates = self._dequantized(codes[best_i.flatten()]).view(len(q), k, -1)
        scores = torch.einsum("qd,qkd->qk", q, candidates)  # the float query against the dequantized vectors
        scores, order = scores.topk(min(top_k, k), dim=1)
        ids = best_i.gather(1, order)
        return [[{"corpus_id": int(i), "score": float(s)} for s, i in zip(rs, ri)]
                for rs, ri in zip(scores.tolist(), ids.tolist())]
