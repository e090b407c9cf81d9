"""Hostile vectors and arguments for semantic_search, EmbeddingIndex and the MTEB encoder: NaN/Inf
rows are refused naming the argument and the rows (never ranked), 1e30 and 1e-30 vectors are
normalised without overflow or underflow, bad counts and containers give one clear error.
The hub's search/similarity: tests/e2e/test_search_and_mteb.py."""

import importlib.util
import os

import numpy as np
import pytest
import torch

from fairseq_clear.errors import FairseqClearError
from fairseq_clear.evaluation.mteb_encoder import MtebEncoder, MtebInputError, NonFiniteVectorsError
from fairseq_clear.search import EmbeddingIndex, SearchInputError, SearchTypeError, semantic_search, unit_rows

# faiss is in the test extra: CI installs it, so the skip never fires there
BACKENDS = ["torch", pytest.param("faiss", marks=pytest.mark.skipif(
    importlib.util.find_spec("faiss") is None and os.environ.get("CI") != "true",
    reason="faiss is not installed (pip install faiss-cpu)"))]


def _data(n=20, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(4, d)).astype(np.float32), rng.normal(size=(n, d)).astype(np.float32)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_semantic_search_refuses_non_finite_rows_naming_argument_and_rows(bad):
    q, c = _data()
    c[3, 2] = bad
    with pytest.raises(SearchInputError, match=r"corpus_embeddings: 1 of 20 vectors hold NaN or Inf \(rows 3\)") as e:
        semantic_search(q, c, top_k=1)
    assert isinstance(e.value, FairseqClearError) and isinstance(e.value, ValueError)
    c[3, 2] = 0.0
    q[[0, 2], 1] = bad
    with pytest.raises(SearchInputError, match=r"query_embeddings: 2 of 4 vectors .*\(rows 0, 2\)"):
        semantic_search(q, c)
    c[::2, 0] = bad  # 10 rows: the first five are listed
    with pytest.raises(SearchInputError, match=r"corpus_embeddings: 10 of 20 .*\(rows 0, 2, 4, 6, 8, \.\.\.\)"):
        semantic_search(q[1:2], torch.from_numpy(c))


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_refuses_non_finite_rows_and_keeps_the_true_match(backend):
    q, c = _data()
    index = EmbeddingIndex(backend=backend).add(c[:10])
    bad = c[10:].copy()
    bad[4, 0] = np.nan
    with pytest.raises(SearchInputError, match=r"embeddings: 1 of 10 vectors .*\(rows 4\)"):
        index.add(bad)
    assert len(index) == 10  # the refused batch added nothing
    assert [row[0]["corpus_id"] for row in index.search(c[:10], top_k=1)] == list(range(10))
    q[1, 3] = np.inf
    with pytest.raises(SearchInputError, match=r"query_embeddings: 1 of 4 .*\(rows 1\)"):
        index.search(q, top_k=1)


@pytest.mark.parametrize("dtype, scale", [(np.float32, 1e30), (np.float32, 1e-30), (np.float32, 1e-40),
                                          (np.float64, 1e300), (np.float64, 1e-300)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_and_tiny_vectors_find_themselves_with_score_one(dtype, scale, backend):
    q, c = _data()
    c = c.astype(dtype)
    c[5] = c[5] * scale
    hits = semantic_search(c[5:6], c, top_k=1)
    assert hits[0][0]["corpus_id"] == 5 and abs(hits[0][0]["score"] - 1.0) < 1e-6, hits
    hits = EmbeddingIndex(backend=backend).add(c).search(c[5], top_k=1)
    assert hits[0][0]["corpus_id"] == 5 and abs(hits[0][0]["score"] - 1.0) < 1e-6, hits
    u = unit_rows(c, "c")
    assert u.dtype == torch.float32 and torch.allclose(u.norm(dim=1), torch.ones(len(c)), atol=1e-6)
    model = MtebEncoder(lambda s: np.zeros((len(s), 8)), name="t/t")
    assert abs(float(model.similarity(c[5], c[5:6])[0, 0]) - 1.0) < 1e-6
    assert abs(float(model.similarity_pairwise(c[5:6], c[5:6])[0]) - 1.0) < 1e-6


def test_a_zero_vector_scores_zero():
    q, c = _data()
    c[7] = 0.0
    assert torch.equal(unit_rows(c)[7], torch.zeros(8))
    hits = semantic_search(q, c, top_k=20)
    scores = {h["corpus_id"]: h["score"] for h in hits[0]}
    assert scores[7] == 0.0 and all(np.isfinite(list(scores.values())))
    assert semantic_search(c[7], c, top_k=3)[0][0]["score"] == 0.0


COUNT_CASES = [
    (2.0, SearchTypeError, r"2\.0 \(float\)"), (True, SearchTypeError, r"True \(bool\)"),
    (None, SearchTypeError, r"None \(NoneType\)"), (0, SearchInputError, "0$"), (-3, SearchInputError, "-3$"),
]


@pytest.mark.parametrize("argument", ["top_k", "query_chunk_size", "corpus_chunk_size"])
@pytest.mark.parametrize("value, error, match", COUNT_CASES)
def test_bad_counts_name_the_argument_and_the_value(argument, value, error, match):
    q, c = _data()
    with pytest.raises(error, match=f"{argument} must be a positive int, got {match}") as e:
        semantic_search(q, c, **{argument: value})
    assert isinstance(e.value, FairseqClearError)
    assert isinstance(e.value, TypeError if error is SearchTypeError else ValueError)
    if argument == "top_k":
        index = EmbeddingIndex().add(c)
        with pytest.raises(error, match=f"top_k must be a positive int, got {match}"):
            index.search(q, top_k=value)
    assert semantic_search(q, c, **{argument: np.int64(2)})[0]  # numpy ints are ints


def test_bad_vectors_name_the_argument():
    q, c = _data()
    with pytest.raises(SearchTypeError, match="corpus_embeddings must be numeric vectors"):
        semantic_search(q, ["a sentence", "another"])
    with pytest.raises(SearchInputError, match="query_embeddings: vectors must be 1-D or 2-D"):
        semantic_search(q[None], c)
    with pytest.raises(SearchInputError, match=r"the index holds 8-dimensional vectors, the queries have 4"):
        EmbeddingIndex().add(c).search(q[:, :4])


def test_mteb_encoder_refuses_non_finite_vectors_naming_the_sentences():
    sentences = ["zero", "one", "two", "three"]

    def broken(batch):
        out = np.ones((len(batch), 4), dtype=np.float32)
        out[[1, 3], 0] = [np.nan, np.inf]
        return out

    want = r"NaN or Inf for 2 of 4 sentences \(sentences 1, 3; the first: 'one'\)"
    with pytest.raises(NonFiniteVectorsError, match=want):
        MtebEncoder(broken, name="t/t").encode(sentences)
    with pytest.raises(SearchInputError, match=r"embeddings2: 2 of 4 .*\(rows 1, 3\)"):
        MtebEncoder(broken, name="t/t").similarity(np.ones((2, 4)), broken(sentences))


@pytest.mark.parametrize("inputs, kind", [(b"bytes", "bytes"), ("one sentence", "str"), ({"text": ["a"]}, "dict"),
                                          (7, "int")])
def test_mteb_encoder_refuses_a_container_that_is_not_sentences(inputs, kind):
    model = MtebEncoder(lambda s: np.ones((len(s), 4)), name="t/t")
    with pytest.raises(MtebInputError, match=f"list of sentences or MTEB batches, not a {kind}$"):
        model.encode(inputs)
    with pytest.raises(MtebInputError, match="batch 0's 'text' is a bytes"):
        model.encode([{"text": b"ab"}])
    with pytest.raises(MtebInputError, match=r"sentences\[2\] is int \(5\)"):
        model.encode([{"text": ["a", "b"]}, {"text": [5]}])
