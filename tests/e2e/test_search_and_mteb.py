"""semantic_search / EmbeddingIndex / hub.search give brute-force cosine's top-k; the MTEB
encoder protocol returns embed()'s vectors and ignores MTEB's task kwargs."""

import numpy as np
import pytest
import torch

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
    # MTEB 2 passes a DataLoader of batch dicts and the task's metadata/split/subset
    batches = [{"text": s[:2]}, {"text": s[2:]}]
    np.testing.assert_allclose(model.encode(batches, task_metadata=None, hf_split="test", hf_subset="default",
                                            prompt_type=None), out, atol=1e-6)
    sim = model.similarity(out, out).numpy()
    assert sim.shape == (3, 3) and np.allclose(np.diag(sim)[[0, 2]], 1.0, atol=1e-5)
    np.testing.assert_allclose(model.similarity_pairwise(out[:1], out[2:]).numpy(), sim[0, 2:], atol=1e-6)
    with pytest.raises(TypeError, match="'text'"):
        model.encode([{"image": None}])
    with pytest.raises(ValueError, match="organization/model_name"):
        MtebEncoder(hub, name="no-slash")


def test_mteb_evaluate_runs_on_a_local_sts_task(hub):
    """mteb.evaluate itself (the optional extra), offline, on STS-B test pairs: its cosine
    Spearman equals ours on the same vectors."""
    from helpers import IN_CI, shared

    if IN_CI:
        import mteb
    else:
        mteb = pytest.importorskip("mteb", reason="pip install 'fairseq-clear[mteb]'")
    from scipy.stats import spearmanr

    from fairseq_clear.evaluation.mteb_encoder import MtebEncoder, local_sts_task
    from fairseq_clear.preprocessing.sts_readers import StsPairs, read_sts_benchmark

    full = read_sts_benchmark(str(shared("sts", "STSBenchmark", "sts-test.csv")))
    pairs = StsPairs("sts-b-test-400", full.sent1[:400], full.sent2[:400], full.scores[:400])
    model = MtebEncoder(hub, pooling="mean", name="fairseq-clear/tiny-test")
    assert isinstance(model, mteb.models.EncoderProtocol)
    result = mteb.evaluate(model, tasks=[local_sts_task(pairs, name="LocalSTSB")], cache=None,
                           show_progress_bar=False)
    assert not result.exceptions and result.model_name == "fairseq-clear/tiny-test"
    scores = result.task_results[0].scores["test"][0]
    a, b = hub.embed(pairs.sent1, pooling="mean"), hub.embed(pairs.sent2, pooling="mean")
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    ours = spearmanr(cos, pairs.scores).correlation
    assert abs(scores["cosine_spearman"] - ours) < 1e-4, (scores, ours)
    assert scores["main_score"] == scores["cosine_spearman"]


def test_hub_search_and_similarity_refuse_non_finite_vectors(hub, monkeypatch):
    """NaN/Inf vectors, given or embedded, are refused naming the argument and rows; 1e30 and 1e-30
    vectors are found with score 1; a bad top_k is refused before anything is embedded."""
    from fairseq_clear.search import SearchInputError, SearchTypeError

    vectors = hub.embed(["The cat sees the ball.", "A dog reads a story.", "Our team builds a red house."])
    bad = vectors.copy()
    bad[1, 0] = np.nan
    with pytest.raises(SearchInputError, match=r"corpus: 1 of 3 vectors hold NaN or Inf \(rows 1\)"):
        hub.search(vectors, bad, top_k=1)
    with pytest.raises(SearchInputError, match=r"queries: 1 of 3 .*\(rows 1\)"):
        hub.search(bad, vectors, top_k=1)
    with pytest.raises(SearchInputError, match=r"^b: 1 of 3 .*\(rows 1\)"):
        hub.similarity(vectors, torch.from_numpy(bad))
    with pytest.raises(SearchInputError, match=r"^a: 1 of 1 .*\(rows 0\)"):
        hub.similarity(bad[1], vectors[1], pairwise=True)
    for scale in (1e30, 1e-30):
        scaled = vectors * np.float32(scale)
        hits = hub.search(scaled, scaled, top_k=1)
        assert [row[0]["corpus_id"] for row in hits] == [0, 1, 2]
        assert all(abs(row[0]["score"] - 1.0) < 1e-6 for row in hits), hits
        assert abs(hub.similarity(scaled[2], scaled[2]) - 1.0) < 1e-6
    with pytest.raises(SearchTypeError, match=r"b must be a str, a list of str or vectors, got bytes"):
        hub.similarity("A dog reads a story.", b"A dog")

    def nan_embed(sentences, **kwargs):  # a model whose forward pass gives NaN for one sentence
        out = torch.ones(len(sentences), hub.dim)
        out[-1] = float("nan")
        return out

    monkeypatch.setattr(hub, "embed", nan_embed)
    with pytest.raises(SearchInputError, match=r"corpus: 1 of 2 .*\(rows 1\)"):
        hub.search(vectors, ["A dog reads a story.", "The river moves very quickly."], top_k=1)
    for top_k in (1.5, None, True, 0):
        with pytest.raises((SearchTypeError, SearchInputError), match=f"top_k must be a positive int, got {top_k}"):
            hub.search(["a"], ["b"], top_k=top_k)
