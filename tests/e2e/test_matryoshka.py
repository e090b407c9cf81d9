"""Matryoshka and duplicate masking end to end: fairseq-train logs the masked counts; the hub's
``embed(truncate_dim=)`` and ``clear-embed --truncate-dim`` give the prefix of the full vectors;
``clear-eval-sts`` scores each trained size in one table; the export keeps every dimension and
records the trained sizes."""

import json

import numpy as np
import pytest

from embedding_helpers import write_senteval_tree
from harness.runs import logged
from helpers import bin_path, make_binarized, run_cli, synthetic_sentences, train_args

DIMS = [128, 32, 8]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("matryoshka")
    unique = synthetic_sentences(60, seed=3)
    data = make_binarized(work / "corpus", unique * 5, synthetic_sentences(20, seed=4))  # every sentence 5 times
    save = work / "ckpt"
    log = run_cli(train_args(
        data, save, "--matryoshka-dims", ",".join(map(str, DIMS)), "--matryoshka-weights", "1,0.5,0.5",
        "--mask-duplicates", "--projection-layers", "0", max_update=4,
    )).stdout
    return save / "checkpoint_last.pt", data, log


@pytest.fixture(scope="module")
def hub(trained):
    from fairseq_clear.models.hub_interface import from_pretrained

    checkpoint, data, _ = trained
    return from_pretrained(checkpoint.parent, checkpoint.name, str(data))


def test_training_logs_the_duplicates_masked_per_update(trained):
    *_, log = trained
    counts = [r.get("dup_masked", 0) for r in logged(log)]
    assert len(counts) == 4 and all(float(c) > 0 for c in counts), log[-3000:]


def test_truncated_embeddings_are_the_prefix_of_the_full_ones(hub):
    sentences = synthetic_sentences(12, seed=9)
    assert hub.matryoshka_dims == DIMS
    full = hub.embed(sentences, normalize=False)
    for d in DIMS:
        np.testing.assert_array_equal(hub.embed(sentences, normalize=False, truncate_dim=d), full[:, :d])
        unit = hub.embed(sentences, normalize=True, truncate_dim=d)
        np.testing.assert_allclose(unit, full[:, :d] / np.linalg.norm(full[:, :d], axis=1, keepdims=True),
                                   rtol=1e-5, atol=1e-6)
    for bad in (0, 129, 2.5):
        with pytest.raises(ValueError, match="truncate_dim"):
            hub.embed(sentences, truncate_dim=bad)


def test_clear_embed_truncate_dim(trained, hub, tmp_path):
    checkpoint, data, _ = trained
    sentences = synthetic_sentences(7, seed=10)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    run_cli([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--input", text,
             "--output", out, "--truncate-dim", "32", "--cpu"])
    np.testing.assert_allclose(np.load(out), hub.embed(sentences)[:, :32], rtol=1e-5, atol=1e-6)
    bad = run_cli([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--input", text,
                   "--output", tmp_path / "w.npy", "--truncate-dim", "500", "--cpu"], check=False)
    assert bad.returncode == 2 and "error: --truncate-dim" in bad.stdout


def test_clear_eval_sts_scores_each_trained_size_in_one_table(trained, tmp_path):
    checkpoint, data, _ = trained
    tree = write_senteval_tree(tmp_path / "senteval")
    out = run_cli([bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--sts-dir", tree,
                   "--output", tmp_path / "sts.json", "--name", "tiny", "--poolings", "cls", "--cpu"]).stdout
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("tiny-")]
    assert rows == ["tiny-[CLS]", "tiny-[CLS]@32", "tiny-[CLS]@8"], out
    report = json.loads((tmp_path / "sts.json").read_text())
    assert set(report["models"]["tiny"]) == {"cls", "cls@32", "cls@8"}


def test_export_keeps_the_full_dimension_and_records_the_trained_sizes(trained, tmp_path):
    pytest.importorskip("sentence_transformers")
    checkpoint, data, _ = trained
    out = tmp_path / "export"
    run_cli([bin_path("clear-export-hf"), "--checkpoint", checkpoint, "--data", data, "--out", out])
    record = json.loads((out / "fairseq_clear_export.json").read_text())
    assert record["dim"] == 128 and record["matryoshka_dims"] == DIMS
    assert record["matryoshka_head"] == "representation"
    assert "Matryoshka sizes" in (out / "README.md").read_text()
