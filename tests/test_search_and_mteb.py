"""semantic_search / EmbeddingIndex / hub.search give brute-force cosine's top-k; the MTEB
encoder protocol returns embed()'s vectors and ignores MTEB's task kwargs."""

import numpy as np
import pytest

from fairseq_clear.search import EmbeddingIndex, semantic_search


def _brute(q, c, k):
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    cn = c / np.linalg.norm(c, axis=1, keepdims=True)
    s = qn @ cn.T
    return np.argsort(-s, axis=1, kind="stable")[:, :k], np.sort(s, axis=1)[:, ::-1][:, :k]


@pytest.mark.parametrize("corpus_chunk", [7, 1000])
def test_semantic_search_equals_brute_force(corpus_chunk):
    rng = np.random.default_rng(0)
    q, c = rng.normal(size=(13, 16)), rng.normal(size=(101, 16))
    hits = semantic_search(q, c, top_k=5, query_chunk_size=4, corpus_chunk_size=corpus_chunk)
    ids, scores = _brute(q, c, 5)
    assert [[h["corpus_id"] for h in row] for row in hits] == ids.tolist()
    np.testing.assert_allclose([[h["score"] for h in row] for row in hits], scores, atol=1e-5)
    index = EmbeddingIndex().add(c[:50]).add(c[50:])
    assert [[h["corpus_id"] for h in r] for r in index.search(q, top_k=5)] == ids.tolist()
    with pytest.raises(ValueError, match="top_k"):
        semantic_search(q, c, top_k=0)
    with pytest.raises(ValueError, match="dimensional"):
        semantic_search(q, c[:, :8])


def test_hub_search_finds_the_sentence_itself(hub):
    corpus = ["The cat sees the ball.", "A dog reads a story.", "The river moves very quickly.",
              "Our team builds a red house.", "The teacher makes an idea."]
    hits = hub.search(corpus, corpus, top_k=2)
    assert [row[0]["corpus_id"] for row in hits] == list(range(len(corpus)))
    assert all(abs(row[0]["score"] - 1.0) < 1e-4 for row in hits)
    vectors = hub.embed(corpus)
    assert hub.search(vectors[:1], vectors, top_k=3)[0][0]["corpus_id"] == 0


def test_mteb_encoder_protocol(hub):
    from fairseq_clear.evaluation.mteb_encoder import MtebEncoder

    model = MtebEncoder(hub, pooling="mean")
    s = ["A dog reads a story.", "", "The cat sees the ball."]
    out = model.encode(s, batch_size=2, task_name="STSBenchmark", prompt_type="query")
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (3, hub.dim)
    np.testing.assert_allclose(out, hub.embed(s, pooling="mean"), atol=1e-6)
    np.testing.assert_allclose(model.encode(iter(s)), out, atol=1e-6)
