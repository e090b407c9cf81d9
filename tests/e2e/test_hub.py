"""ClearRobertaModel.from_pretrained → ClearHubInterface: embed(), similarity(), bad input, clear-embed."""

import logging
import shutil

import numpy as np
import pytest
import torch

from helpers import bin_path, run_cli

SENTENCES = [
    "The cat sees the ball.",
    "",
    "A small child follows the long road in the evening near the sea with care.",
    "x",
    "Café naïve 東京 😀 — “quoted”",
    "Our team builds a red house every day.",
    "   spaces   around   ",
    "The teacher reads a story.",
]


def one_by_one_cls(hub, sentences):
    with torch.no_grad():
        return np.stack([hub.extract_features(hub.encode(s))[0, 0].numpy() for s in sentences])


def test_from_pretrained_needs_no_training_files_and_keeps_roberta_methods(hub):
    from fairseq_clear.models.hub_interface import ClearHubInterface

    # the checkpoint was trained with 'subs' and a synonym table that no longer exists
    assert isinstance(hub, ClearHubInterface)
    assert hub.task.cfg.augmentations == "none" and hub.task.cfg.synonym_table == ""
    assert not hub.model.training
    tokens = hub.encode("The cat sees the ball.")
    assert tokens[0].item() == 0 and tokens[-1].item() == 2
    assert hub.decode(tokens) == "The cat sees the ball."
    assert hub.extract_features(tokens).shape == (1, len(tokens), 128)
    filled = hub.fill_mask("The cat <mask> the ball.", topk=3)
    # fairseq splits the predictions on spaces, so a bare "▁" piece can shorten the list
    assert 1 <= len(filled) <= 3 and all(isinstance(p, float) and text.startswith("The cat") for text, p, _ in filled)
    assert hub.dim == 128 and hub.default_pooling == "cls"


def test_embed_equals_per_sentence_extract_features_in_input_order(hub):
    vectors = hub.embed(SENTENCES, batch_size=3)
    assert vectors.shape == (len(SENTENCES), 128) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, one_by_one_cls(hub, SENTENCES), atol=1e-5, rtol=0)
    # the batched tokenizer gives exactly the ids of fairseq's bpe + dictionary path
    for s, t in zip(SENTENCES, hub.tokenizer.encode(SENTENCES)):
        assert t.tolist() == hub.encode(s).tolist(), s
    # the empty string is <s></s>
    assert hub.tokenizer.encode([""])[0].tolist() == [0, 2]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_batched_equals_one_by_one(hub, pooling):
    batched = hub.embed(SENTENCES, pooling=pooling, batch_size=64)
    single = np.stack([hub.embed([s], pooling=pooling, batch_size=1)[0] for s in SENTENCES])
    np.testing.assert_allclose(batched, single, atol=1e-5, rtol=0)


def test_mean_pooling_is_the_models_sentence_representation(hub):
    for s in SENTENCES[:3]:
        tokens = hub.encode(s).unsqueeze(0)
        with torch.no_grad():
            want = hub.model.sentence_representation(tokens, pooling="mean")[0].numpy()
        np.testing.assert_allclose(hub.embed(s, pooling="mean"), want, atol=1e-5, rtol=0)
    assert not np.allclose(hub.embed(SENTENCES[0], pooling="mean"), hub.embed(SENTENCES[0], pooling="cls"))


def test_embed_output_options(hub):
    assert hub.embed([]).shape == (0, 128)
    empty = hub.embed([], convert_to="torch")
    assert isinstance(empty, torch.Tensor) and tuple(empty.shape) == (0, 128)
    single = hub.embed("The cat sees the ball.")
    assert single.shape == (128,)
    normed = hub.embed(SENTENCES, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(normed, axis=1), 1.0, atol=1e-5)
    t = hub.embed(SENTENCES, convert_to="torch")
    assert t.dtype == torch.float32 and t.device == hub.device
    np.testing.assert_allclose(t.numpy(), hub.embed(SENTENCES), atol=1e-6)
    with pytest.raises(ValueError, match="pooling"):
        hub.embed(SENTENCES, pooling="median")
    with pytest.raises(ValueError, match="convert_to"):
        hub.embed(SENTENCES, convert_to="list")
    with pytest.raises(ValueError, match="batch_size"):
        hub.embed(SENTENCES, batch_size=0)


@pytest.mark.parametrize("bad, index, kind", [
    (["a", None, "b"], 1, "NoneType"),
    (["a", "b", 3], 2, "int"),
    ([b"bytes"], 0, "bytes"),
])
def test_non_string_items_name_their_index(hub, bad, index, kind):
    with pytest.raises(TypeError, match=rf"sentences\[{index}\] is {kind}"):
        hub.embed(bad)


def test_long_sentences_are_truncated_with_a_warning_and_a_count(hub, caplog):
    long = " ".join(["the cat sees the ball"] * 40)  # far beyond 64 positions
    with caplog.at_level(logging.WARNING):
        vectors = hub.embed([long, "short", long])
    assert hub.num_truncated == 2
    assert "truncated 2 of 3 sentences" in caplog.text
    assert vectors.shape == (3, 128) and np.isfinite(vectors).all()
    tokens = hub.tokenizer.encode([long], max_positions=hub.model.max_positions())[0]
    assert len(tokens) == 64 and tokens[-1].item() == 2
    hub.embed(["short"])
    assert hub.num_truncated == 0


def test_projection_head_only_when_asked(hub):
    default = hub.embed(SENTENCES)
    projected = hub.embed(SENTENCES, head="projection")
    with torch.no_grad():
        want = hub.model.projection_head(torch.from_numpy(default)).numpy()
    np.testing.assert_allclose(projected, want, atol=1e-5, rtol=0)
    assert not np.allclose(projected, default)
    np.testing.assert_allclose(hub.embed(SENTENCES, head="pooled"), default, atol=1e-6)


def test_clsr_sentence_encoder_is_the_default_representation(hub):
    from fairseq_clear.models.clear_roberta import SentenceMLP

    torch.manual_seed(0)
    hub.model.sentence_mlp = SentenceMLP(128, 32, 24)
    try:
        pooled = hub.embed(SENTENCES, head="pooled")
        default = hub.embed(SENTENCES)
        assert pooled.shape == (len(SENTENCES), 128) and default.shape == (len(SENTENCES), 24)
        with torch.no_grad():
            want = hub.model.sentence_mlp(torch.from_numpy(pooled)).numpy()
        np.testing.assert_allclose(default, want, atol=1e-5, rtol=0)
        assert hub.dim == 24 and hub.embed([]).shape == (0, 24)
    finally:
        hub.model.sentence_mlp = None


def test_similarity_of_sentences_and_vectors(hub):
    a, b = SENTENCES[:3], SENTENCES[3:]
    va, vb = hub.embed(a), hub.embed(b)
    want = (va / np.linalg.norm(va, axis=1, keepdims=True)) @ (vb / np.linalg.norm(vb, axis=1, keepdims=True)).T
    np.testing.assert_allclose(hub.similarity(a, b), want, atol=1e-5)
    np.testing.assert_allclose(hub.similarity(va, torch.from_numpy(vb)), want, atol=1e-5)
    assert hub.similarity(a[0], a[0]) == pytest.approx(1.0, abs=1e-5)
    assert isinstance(hub.similarity(a[0], b[0]), float)
    np.testing.assert_allclose(hub.similarity(a, b[:3], pairwise=True), np.diag(want[:, :3]), atol=1e-5)
    assert hub.similarity(a, b, pooling="mean").shape == (3, 5)
    with pytest.raises(ValueError, match="dimensional"):
        hub.similarity(va, np.ones((2, 7)))
    with pytest.raises(TypeError, match=r"a\[1\]"):
        hub.similarity(["ok", None], b)


def test_bad_checkpoint_directories_give_clear_errors(ckpt, tmp_path):
    from fairseq_clear.models import ClearRobertaModel
    from fairseq_clear.models.hub_interface import HubLoadError

    checkpoint, data = ckpt
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(checkpoint, model_dir / "model.pt")

    no_dict = tmp_path / "no_dict"
    no_dict.mkdir()
    shutil.copy(data / "sentencepiece.model", no_dict)
    with pytest.raises(HubLoadError, match="no dict.txt in"):
        ClearRobertaModel.from_pretrained(model_dir, "model.pt", no_dict)

    no_spm = tmp_path / "no_spm"
    no_spm.mkdir()
    shutil.copy(data / "dict.txt", no_spm)
    with pytest.raises(HubLoadError, match="no sentencepiece model"):
        ClearRobertaModel.from_pretrained(model_dir, "model.pt", no_spm)
    with pytest.raises(HubLoadError, match="does not exist"):
        ClearRobertaModel.from_pretrained(model_dir, "model.pt", no_spm, sentencepiece_model=str(tmp_path / "x.model"))
    with pytest.raises(HubLoadError, match="checkpoint_best.pt"):
        ClearRobertaModel.from_pretrained(model_dir, "checkpoint_best.pt", data)

    bigger = tmp_path / "bigger"
    shutil.copytree(data, bigger)
    with open(bigger / "dict.txt", "a", encoding="utf-8") as f:
        f.write("extra1 1\nextra2 1\nextra3 1\n")
    with pytest.raises(HubLoadError) as err:
        ClearRobertaModel.from_pretrained(model_dir, "model.pt", bigger)
    message = str(err.value)
    n = len(open(data / "dict.txt").read().splitlines()) + 4
    assert str(bigger / "dict.txt") in message
    assert f"dictionary of {n} types" in message and f"gives {n + 3}" in message

    # sentencepiece model next to the checkpoint instead of the data: found there
    shutil.copy(data / "sentencepiece.model", model_dir)
    hub = ClearRobertaModel.from_pretrained(model_dir, "model.pt", no_spm)
    assert hub.embed(["a"]).shape == (1, 128)


def test_clear_embed_cli_writes_one_row_per_line(ckpt, hub, tmp_path):
    checkpoint, data = ckpt
    lines = ["The cat sees the ball.", "", "Our team builds a red house every day.", "x"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = run_cli([
        bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--input", tmp_path / "in.txt",
        "--output", tmp_path / "out.npy", "--tsv", tmp_path / "out.tsv", "--pooling", "mean", "--cpu",
    ]).stdout
    vectors = np.load(tmp_path / "out.npy")
    assert vectors.shape == (4, 128) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, hub.embed(lines, pooling="mean"), atol=1e-5)
    tsv = np.loadtxt(tmp_path / "out.tsv", delimiter="\t")
    np.testing.assert_allclose(tsv, vectors, atol=1e-4)
    assert "4 sentences" in out and "1 empty" in out
    missing = run_cli([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data,
                       "--input", tmp_path / "nope.txt", "--output", tmp_path / "x.npy"], check=False)
    assert missing.returncode != 0 and "nope.txt" in missing.stdout
