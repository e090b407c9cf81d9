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
    from fairseq_clear.models.inference import SentencepieceDictionaryEncoder

    text = synthetic_sentences(500, seed=3) + ["Café naïve résumé 3.5% ½ “quoted” text… 東京"] * 5
    (tmp_path / "train.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "train.txt"), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=150, model_type="bpe", hard_vocab_limit=False, minloglevel=2)
    write_dict_from_spm(str(tmp_path / "sp.model"), str(tmp_path / "dict.txt"))
    dictionary = Dictionary.load(str(tmp_path / "dict.txt"))
    ours = SentencepieceDictionaryEncoder(str(tmp_path / "sp.model"), dictionary)
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

    from fairseq_clear.export.hf import build_tokenizer, keep_special_text
    from fairseq_clear.models.inference import SentencepieceDictionaryEncoder
    from fairseq_clear.preprocessing.sts_readers import read_sts_benchmark

    pairs = read_sts_benchmark(str(sts_b))
    sentences = pairs.sent1 + pairs.sent2
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "t.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(sentences[:2000]) + "\n")
        spm.SentencePieceTrainer.train(input=os.path.join(tmp, "t.txt"), model_prefix=os.path.join(tmp, "sp"),
                                       vocab_size=2000, model_type="unigram", minloglevel=2)
        write_dict_from_spm(os.path.join(tmp, "sp.model"), os.path.join(tmp, "dict.txt"))
        ours = SentencepieceDictionaryEncoder(os.path.join(tmp, "sp.model"), Dictionary.load(os.path.join(tmp, "dict.txt")))
        theirs = build_tokenizer(os.path.join(tmp, "sp.model"), 512)
        # its lower special scores must not change how real text (unknown characters too) is read
        kept = [t for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>") if t not in keep_special_text(theirs)]
        sentences += [f"{s} {' '.join(kept)}" for s in sentences[:50]]
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


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_literal_special_token_text_stays_text(tmp_path, model_type):
    """'<mask>' typed in a sentence is text for our sentencepiece tokenizer: the export reads it so too,
    after a save and reload (split_special_tokens in tokenizer_config.json), unless a character of it
    has no piece (then it is named)."""
    import sentencepiece as spm
    from fairseq.data import Dictionary
    from transformers import AutoTokenizer

    from fairseq_clear.export.hf import build_tokenizer, keep_special_text
    from fairseq_clear.models.inference import SentencepieceDictionaryEncoder

    text = synthetic_sentences(500, seed=3) + ["tags <b> and </b> or a < b > c / d: pad, unk, mask"] * 20
    (tmp_path / "t.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "t.txt"), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=120, model_type=model_type, hard_vocab_limit=False, minloglevel=2)
    write_dict_from_spm(str(tmp_path / "sp.model"), str(tmp_path / "dict.txt"))
    ours = SentencepieceDictionaryEncoder(str(tmp_path / "sp.model"), Dictionary.load(str(tmp_path / "dict.txt")))
    tokenizer = build_tokenizer(str(tmp_path / "sp.model"), 512)
    probe = ["the cat <mask> sees", "<s> hello </s>", "a<pad>b <unk>", "x </s><mask>", "<mask>", "plain text"]
    before = [tokenizer(s)["input_ids"] for s in probe]
    assert keep_special_text(tokenizer) == []
    tokenizer.save_pretrained(str(tmp_path / "tok"))
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    want = [t.tolist() for t in ours.encode(probe)]
    assert [reloaded(s)["input_ids"] for s in probe] == want
    if model_type == "unigram":
        assert before[0] != want[0]  # without it, '<mask>' was the mask token

    # a model without '/' cannot keep '</s>' as text: it is named
    (tmp_path / "u.txt").write_text("\n".join(synthetic_sentences(500, seed=3) + ["a < b > c"] * 20) + "\n",
                                    encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "u.txt"), model_prefix=str(tmp_path / "u"),
                                   vocab_size=100, model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    assert "</s>" in keep_special_text(build_tokenizer(str(tmp_path / "u.model"), 512))


def test_export_of_a_model_that_knows_the_characters_keeps_literal_specials_as_text(tmp_path):
    """End to end: a checkpoint whose sentencepiece model has '<', '>', '/' and the letters; the
    CLI's verification embeds sentences with each special's text in them, and sentence-transformers
    gives the hub's vectors for them."""
    from sentence_transformers import SentenceTransformer

    from helpers import make_binarized, train_args

    from fairseq_clear.models import ClearRobertaModel

    text = synthetic_sentences(400, seed=0) + ["tags <b> and </b> or a < b > c / d: pad, unk, mask, x, y, z"] * 40
    data = make_binarized(tmp_path / "corpus", text, synthetic_sentences(40, seed=1))
    run_cli(train_args(data, tmp_path / "ckpt", max_update=4))
    out = tmp_path / "st"
    log = run_cli([bin_path("clear-export-hf"), "--checkpoint", tmp_path / "ckpt" / "checkpoint_last.pt",
                   "--data", data, "--out", out]).stdout
    assert "matches the hub within" in log
    meta = json.loads((out / "fairseq_clear_export.json").read_text())
    assert meta["literal_special_tokens"] == {"text": True, "except": []}
    hub = ClearRobertaModel.from_pretrained(str(tmp_path / "ckpt"), "checkpoint_last.pt", str(data))
    st = SentenceTransformer(str(out), device="cpu")
    probe = ["fill the <mask> here", "<s> tags </s>", "a <pad> and an <unk>"]
    np.testing.assert_allclose(st.encode(probe), hub.embed(probe), atol=1e-4, rtol=0)
    assert [st.tokenizer(s)["input_ids"] for s in probe] == [hub.encode(s).tolist() for s in probe]


def test_a_new_tokenizer_class_exports_without_other_edits(hub, tmp_path):
    """A tokenizer kind the export never names: its class carries the layout (docs/design.md)."""
    from fairseq_clear import vocabulary
    from fairseq_clear.export.hf import CHECK_SENTENCES, export

    class ToySentencepiece(vocabulary.SentencepieceTokenizer):
        kind = "toy-sentencepiece"

    saved = hub.tokenizer
    try:
        hub.tokenizer = vocabulary.DictionaryEncoder(ToySentencepiece(saved.path), hub.task.source_dictionary)
        export(hub, str(tmp_path / "st"), check_sentences=CHECK_SENTENCES + SENTENCES)  # verified against embed()
    finally:
        hub.tokenizer = saved
        vocabulary.TOKENIZERS.pop("toy-sentencepiece", None)
    assert "toy-sentencepiece tokenizer" in (tmp_path / "st" / "README.md").read_text(encoding="utf-8")
    assert (tmp_path / "st" / "sentencepiece.bpe.model").is_file()
