"""clear-export-hf: the exported Hugging Face / sentence-transformers model gives the hub's vectors."""

import json
import os
import tempfile

import numpy as np
import pytest
import torch

from helpers import bin_path, run_cli, shared, synthetic_sentences, write_dict_from_spm

pytest.importorskip("sentence_transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SENTENCES = [
    "The cat sees the ball.",
    "",
    "Café naïve 東京 😀 — “quoted”  text…",
    "A small child follows the long road in the evening near the sea with care.",
    "THE TEACHER READS A STORY",
    " ".join(["our team builds a red house"] * 20),  # longer than 64 positions: truncated alike
]


def test_cli_export_loads_in_sentence_transformers_and_transformers(ckpt, hub, tmp_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    checkpoint, data = ckpt
    out = tmp_path / "st"
    log = run_cli([bin_path("clear-export-hf"), "--checkpoint", checkpoint, "--data", data, "--out", out]).stdout
    assert "matches the hub within" in log
    st = SentenceTransformer(str(out), device="cpu")
    np.testing.assert_allclose(st.encode(SENTENCES), hub.embed(SENTENCES), atol=1e-4, rtol=0)
    assert st.encode(SENTENCES[0]).shape == (128,)

    # plain transformers: the same token ids as fairseq, the same [CLS] features
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    model = AutoModel.from_pretrained(str(out), add_pooling_layer=False).eval()
    for s in SENTENCES[:5]:
        ids = tokenizer(s)["input_ids"]
        assert ids == hub.encode(s).tolist(), s
        with torch.no_grad():
            cls = model(torch.tensor([ids])).last_hidden_state[0, 0].numpy()
        np.testing.assert_allclose(cls, hub.embed(s), atol=1e-4, rtol=0)
    assert tokenizer.mask_token_id == hub.task.mask_idx
    meta = json.loads((out / "fairseq_clear_export.json").read_text())
    assert meta["pooling"] == "cls" and meta["max_positions"] == 64


@pytest.mark.parametrize("pooling, head, normalize", [("mean", "representation", True), ("cls", "projection", False)])
def test_export_variants_match_the_hub(hub, tmp_path, pooling, head, normalize):
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.hf import export, verify

    out = tmp_path / "st"
    export(hub, str(out), pooling=pooling, head=head, normalize=normalize)
    assert verify(hub, str(out), SENTENCES, pooling, head, normalize) <= 1e-4
    st = SentenceTransformer(str(out), device="cpu")
    want = hub.embed(SENTENCES, pooling=pooling, head=head, normalize=normalize)
    np.testing.assert_allclose(st.encode(SENTENCES), want, atol=1e-4, rtol=0)


def test_clsr_sentence_encoder_exports_as_dense_layers(hub, tmp_path):
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.hf import export
    from fairseq_clear.models.clear_roberta import SentenceMLP

    torch.manual_seed(0)
    hub.model.sentence_mlp = SentenceMLP(128, 32, 24)
    try:
        export(hub, str(tmp_path / "st"), pooling="mean")
        st = SentenceTransformer(str(tmp_path / "st"), device="cpu")
        got = st.encode(SENTENCES)
        assert got.shape == (len(SENTENCES), 24)
        np.testing.assert_allclose(got, hub.embed(SENTENCES, pooling="mean"), atol=1e-4, rtol=0)
    finally:
        hub.model.sentence_mlp = None


def test_bpe_sentencepiece_models_tokenize_identically(tmp_path):
    import sentencepiece as spm
    from fairseq.data import Dictionary

    from fairseq_clear.export.hf import build_tokenizer
    from fairseq_clear.models.inference import SentencepieceTokenizer

    text = synthetic_sentences(500, seed=3) + ["Café naïve résumé 3.5% ½ “quoted” text… 東京"] * 5
    (tmp_path / "train.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "train.txt"), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=150, model_type="bpe", hard_vocab_limit=False, minloglevel=2)
    write_dict_from_spm(str(tmp_path / "sp.model"), str(tmp_path / "dict.txt"))
    dictionary = Dictionary.load(str(tmp_path / "dict.txt"))
    ours = SentencepieceTokenizer(str(tmp_path / "sp.model"), dictionary)
    tokenizer = build_tokenizer(str(tmp_path / "sp.model"), 512)
    tokenizer.save_pretrained(str(tmp_path / "tok"))
    from transformers import AutoTokenizer

    reloaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    probe = synthetic_sentences(40, seed=11) + SENTENCES[:5] + ["  a\tb  c ", "東京 and 😀"]
    for s in probe:
        assert reloaded(s)["input_ids"] == ours.encode([s])[0].tolist(), s


def test_real_text_tokenizes_identically():
    """The exported tokenizer on every STS-B test sentence (unicode, punctuation, casing)."""
    sts_b = shared("sts", "STSBenchmark", "sts-test.csv")
    import sentencepiece as spm
    from fairseq.data import Dictionary

    from fairseq_clear.export.hf import build_tokenizer
    from fairseq_clear.models.inference import SentencepieceTokenizer
    from fairseq_clear.evaluation.sts import read_sts_benchmark

    pairs = read_sts_benchmark(str(sts_b))
    sentences = pairs.sent1 + pairs.sent2
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "t.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(sentences[:2000]) + "\n")
        spm.SentencePieceTrainer.train(input=os.path.join(tmp, "t.txt"), model_prefix=os.path.join(tmp, "sp"),
                                       vocab_size=2000, model_type="unigram", minloglevel=2)
        write_dict_from_spm(os.path.join(tmp, "sp.model"), os.path.join(tmp, "dict.txt"))
        ours = SentencepieceTokenizer(os.path.join(tmp, "sp.model"), Dictionary.load(os.path.join(tmp, "dict.txt")))
        theirs = build_tokenizer(os.path.join(tmp, "sp.model"), 512)
        want = [t.tolist() for t in ours.encode(sentences)]
        got = theirs(sentences)["input_ids"]
    mismatches = [s for s, a, b in zip(sentences, want, got) if a != b]
    assert not mismatches, mismatches[:3]


def test_dictionary_out_of_sentencepiece_order_is_refused(ckpt, hub, tmp_path):
    from fairseq_clear.export.hf import ExportError, check_vocabulary_layout
    from fairseq.data import Dictionary

    _, data = ckpt
    lines = (data / "dict.txt").read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    (tmp_path / "dict.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(ExportError, match="fairseq id = sentencepiece id \\+ 1"):
        check_vocabulary_layout(hub.tokenizer, Dictionary.load(str(tmp_path / "dict.txt")))


@pytest.mark.parametrize("pooling, head, simcse", [("cls", "representation", "pooler='cls_before_pooler'"),
                                                    ("mean", "representation", "pooler='avg'"),
                                                    ("cls", "projection", "cannot reproduce")])
def test_model_card_says_what_the_model_is_and_how_to_read_it(hub, tmp_path, pooling, head, simcse):
    from fairseq_clear.export.hf import export

    out = tmp_path / "st"
    export(hub, str(out), pooling=pooling, head=head)
    card = (out / "README.md").read_text(encoding="utf-8")
    from fairseq_clear.checkpoint_safety import training_task_config

    augmentations = training_task_config(hub.checkpoint_path)["augmentations"]
    assert augmentations != "none" and hub.cfg.task.augmentations == "none"  # the hub's inference override
    assert f"CLEAR (Wu et al. 2020): masked LM + NT-Xent between two views made with `{augmentations}`" in card
    assert f"{hub.model.args.encoder_layers} layers x {hub.model.args.encoder_embed_dim}" in card
    assert f"{pooling} pooling of the last layer" in card
    assert simcse in card
    assert "sentencepiece tokenizer" in card and os.path.basename(str(hub.cfg.task.data).rstrip("/")) in card
