"""Semantic search over sentence vectors, in sentence-transformers' ``util.semantic_search`` style.

    hits = semantic_search(hub.embed(queries), hub.embed(corpus), top_k=5)
    hits[0][0]  # {'corpus_id': 17, 'score': 0.83}: the best match of the first query

Cosine similarity with torch top-k, chunked over queries and corpus so that
memory stays bounded. :class:`EmbeddingIndex` keeps a corpus for repeated
searches and uses faiss (inner product on unit vectors) when it is installed
and asked for (``backend="faiss"``).
"""

from typing import Dict, List, Optional

import numpy as np
import torch


def _unit(x) -> torch.Tensor:
    x = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).float()
    if x.ndim == 1:
        x = x.unsqueeze(0)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be 1-D or 2-D, got shape {tuple(x.shape)}")
    return torch.nn.functional.normalize(x, dim=-1, eps=1e-12)


def semantic_search(query_embeddings, corpus_embeddings, top_k: int = 10, query_chunk_size: int = 100,
                    corpus_chunk_size: int = 500000) -> List[List[Dict[str, float]]]:
    """For each query, the ``top_k`` corpus entries by cosine similarity, best first."""
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    q, c = _unit(query_embeddings), _unit(corpus_embeddings)
    if q.size(1) != c.size(1):
        raise ValueError(f"queries have {q.size(1)}-dimensional vectors but the corpus has {c.size(1)}")
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
    """A corpus of vectors to search repeatedly (``add`` more at any time)."""

    def __init__(self, dim: Optional[int] = None, backend: str = "torch"):
        if backend not in ("torch", "faiss"):
            raise ValueError(f"backend must be 'torch' or 'faiss', got {backend!r}")
        if backend == "faiss":
            try:
                import faiss  # noqa: F401
            except ImportError:
                raise ImportError("backend='faiss' needs the faiss package (pip install faiss-cpu)") from None
        self.backend, self.dim = backend, dim
        self._vectors = []
        self._faiss = None

    def __len__(self):
        return sum(len(v) for v in self._vectors)

    def add(self, embeddings) -> "EmbeddingIndex":
        v = _unit(embeddings)
        if self.dim is None:
            self.dim = v.size(1)
        if v.size(1) != self.dim:
            raise ValueError(f"the index holds {self.dim}-dimensional vectors, got {v.size(1)}")
        self._vectors.append(v)
        if self.backend == "faiss":
            import faiss

            if self._faiss is None:
                self._faiss = faiss.IndexFlatIP(self.dim)
            self._faiss.add(v.numpy())
        return self

    def search(self, query_embeddings, top_k: int = 10) -> List[List[Dict[str, float]]]:
        if not len(self):
            raise ValueError("the index is empty: add() corpus vectors first")
        if self.backend == "faiss":
            scores, ids = self._faiss.search(_unit(query_embeddings).numpy(), min(top_k, len(self)))
            return [[{"corpus_id": int(i), "score": float(s)} for s, i in zip(rs, ri)] for rs, ri in zip(scores, ids)]
        return semantic_search(query_embeddings, torch.cat(self._vectors), top_k)
