"""What sentence-transformers does to a sentence survives clear-import-hf, embed() and clear-export-hf.

An import kept the pooling and Normalize only: a model's ``max_seq_length`` (all-MiniLM-L6-v2: 256) became
the encoder's positions (512; a 400-word input then gave a cosine of 0.880 to the source's vector), its
``do_lower_case`` was dropped (0.011-0.030 on any capitalised sentence), a default prompt too, and the
import's check compared with transformers, not with sentence-transformers' ``encode()``. The export's
``1_Pooling/config.json`` held only ``pooling_mode``, which TEI does not read (it needs every legacy
``pooling_mode_*`` flag). Here a tiny XLM-R (cased sentencepiece) saved by sentence-transformers with
``max_seq_length`` 16, ``do_lower_case`` and the dot product as its similarity goes through the import,
embed() and the export; all-MiniLM-L6-v2 (256 of 512 positions) goes through import, training and
export in tests/e2e/test_start_model.py.
"""

import json

import numpy as np
import pytest

from hf_standins import make_xlmr

pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.xdist_group("test_st_settings")

LONG = " ".join(["The quick brown fox jumps over the lazy dog."] * 45)  # 405 words
SENTENCES = [LONG, "A Capitalised Sentence About The Weather In Zürich.", "UPPER CASE WORDS", "plain words"]
#: TEI's reading of 1_Pooling/config.json (router/src/lib.rs): every legacy flag, a bool, no default
TEI_KEYS = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def _save(source, out, **transformer):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    encoder = Transformer(str(source), **transformer)
    SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean")],
                        device="cpu").save(str(out))
    return out


def _cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(source folder, its sentence-transformers vectors of SENTENCES, the import's summary, its hub)."""
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.models.hub_interface import from_pretrained

    root = tmp_path_factory.mktemp("st_settings")
    source = _save(make_xlmr(root / "xlmr"), root / "st", max_seq_length=16)
    # as sentence-transformers < 6 saved them (most published models): sentence-transformers 6 reads them
    config = source / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_seq_length": 16, "do_lower_case": True}))
    config = source / "config_sentence_transformers.json"  # sentence-transformers' similarity(): dot products
    config.write_text(json.dumps({**json.loads(config.read_text()), "similarity_fn_name": "dot"}))
    want = SentenceTransformer(str(source), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    summary = import_hf(str(source), str(root / "imported"))
    return source, want, summary, from_pretrained(str(root / "imported"), "model.pt", ".")


def test_the_import_records_max_seq_length_and_do_lower_case(imported):
    source, want, summary, hub = imported
    assert summary["options"]["sentence_max_length"] == 16 and summary["options"]["sentence_lowercase"] is True
    assert summary["options"]["sentence_similarity"] == "dot"
    assert "sentence_prompts" not in summary["options"]  # sentence-transformers 6 saves empty prompts: none kept
    args = (source.parent / "imported" / "fairseq_args.txt").read_text()
    assert "--sentence-max-length 16" in args and "--sentence-lowercase" in args
    assert "--sentence-similarity dot" in args
    assert hub.max_length == 16 and hub.lowercase
    assert _cosines(hub.embed(SENTENCES), want).min() >= 0.9999


def test_the_export_writes_them_back(imported, tmp_path):
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.hf import CHECK_SENTENCES, export

    _, want, _, hub = imported
    export(hub, str(tmp_path / "out"), check_sentences=CHECK_SENTENCES)
    config = json.loads((tmp_path / "out" / "sentence_bert_config.json").read_text())
    assert config["max_seq_length"] == 16 and config["do_lower_case"] is True
    st = SentenceTransformer(str(tmp_path / "out"), device="cpu")
    assert st.similarity_fn_name == "dot"
    got = st.encode(SENTENCES, convert_to_numpy=True)
    assert _cosines(got, want).min() >= 0.9999
    card = (tmp_path / "out" / "README.md").read_text()
    assert "no contrastive training" not in card  # the imported model was not trained here
    assert "**Starting model**: a sentence-transformers model" in card
    assert "max_length=16" in card and "s.lower()" in card  # the transformers-alone snippet
    assert _tei_flags(tmp_path / "out") == ["pooling_mode_mean_tokens"]


def _tei_flags(folder):
    """1_Pooling/config.json as TEI reads it: every legacy flag, a bool (a KeyError is TEI's refusal)."""
    config = json.loads((folder / "1_Pooling" / "config.json").read_text())
    flags = {key: config[key] for key in TEI_KEYS}
    assert all(type(v) is bool for v in flags.values())
    return [k for k, v in flags.items() if v]


def test_the_pooling_config_reads_under_teis_strict_schema(imported, tmp_path):
    """Every legacy flag present and a bool, exactly the export's mode on (max here; mean in
    test_the_export_writes_them_back); sentence-transformers still reads ``pooling_mode`` (it drops the
    flags when that key is there)."""
    pooling = "max"
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.hf import export

    _, _, _, hub = imported
    export(hub, str(tmp_path / "out"), pooling=pooling)
    assert _tei_flags(tmp_path / "out") == ["pooling_mode_max_tokens"]
    st = SentenceTransformer(str(tmp_path / "out"), device="cpu")
    assert st[1].pooling_mode == pooling
    np.testing.assert_allclose(st.encode(["A man is playing a guitar."]), hub.embed(["A man is playing a guitar."],
                                                                                    pooling=pooling), atol=1e-5)


#: the source's prompts: the default one puts "query: " before every sentence, as encode() does
PROMPTS = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def prompted(imported, tmp_path_factory):
    """``imported``'s source saved with PROMPTS and "query" as its default prompt: (source, its encode() of
    SENTENCES, the import's folder, its hub)."""
    import shutil

    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.models.hub_interface import from_pretrained

    root = tmp_path_factory.mktemp("prompted")
    source = shutil.copytree(imported[0], root / "st")
    path = source / "config_sentence_transformers.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "prompts": PROMPTS, "default_prompt_name": "query"}))
    want = SentenceTransformer(str(source), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    import_hf(str(source), str(root / "imported"))  # its check compares embed() with this encode()
    return source, want, root / "imported", from_pretrained(str(root / "imported"), "model.pt", ".")


def test_a_default_prompt_is_kept_by_the_import_training_and_the_export(prompted, tmp_path):
    """Before, the import refused a default prompt (and dropped other prompts): now embed() puts it before
    every sentence as encode() does (cosine >= 0.9999), the option travels as one word through
    fairseq_args.txt, clear-glue model-args and fairseq's parser, and the export writes the prompts back."""
    from fairseq import options
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.continued import model_args
    from fairseq_clear.export.hf import export

    _, want, folder, hub = prompted
    assert hub.prompt == "query: " and hub.prompts == (PROMPTS, "query")
    assert _cosines(hub.embed(SENTENCES), want).min() >= 0.9999
    assert _cosines(hub.embed(SENTENCES), hub.embed(["query: " + s for s in SENTENCES])).min() < 0.9999
    # training: the recipes read fairseq_args.txt and model-args as space-separated words
    for words in ((folder / "fairseq_args.txt").read_text().split(), model_args(str(folder / "model.pt"))):
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(parser, [str(folder), "--task", "masked_lm", "--user-dir",
                                                    str(__import__("fairseq_clear").__path__[0])] + words)
        assert args.sentence_prompts == hub.model.args.sentence_prompts
    export(hub, str(tmp_path / "out"), check_sentences=["A man is playing a guitar."])
    config = json.loads((tmp_path / "out" / "config_sentence_transformers.json").read_text())
    # sentence-transformers 6 adds its empty "document" prompt
    assert {k: v for k, v in config["prompts"].items() if v} == PROMPTS and config["default_prompt_name"] == "query"
    got = SentenceTransformer(str(tmp_path / "out"), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    assert _cosines(got, want).min() >= 0.9999
    # the card's transformers-alone snippet puts the prompt first, then lower-cases
    assert "[('query: ' + s).lower() for s in sentences]" in (tmp_path / "out" / "README.md").read_text()


@pytest.mark.parametrize("word", ["query%3A%20", "%7B%22prompts%22%3A%7B%7D%7D", "-x", "a b"])
def test_a_prompts_word_that_clear_import_hf_did_not_write_is_refused_in_one_line(prompted, word):
    """Refused when the model is loaded (naming the checkpoint), not at its first embed()."""
    from fairseq_clear.models.hub_interface import HubLoadError, from_pretrained

    with pytest.raises(HubLoadError) as e:
        from_pretrained(str(prompted[2]), "model.pt", ".", sentence_prompts=word)
    assert "model.pt" in str(e.value) and "--sentence-prompts" in str(e.value) and "\n" not in str(e.value)


def test_sts_validation_and_clear_eval_sts_read_sentences_as_embed_does(prompted, tmp_path):
    """The STS validation (and the STS_DEV start score) and clear-eval-sts --checkpoint embedded a sentence
    without the model's default prompt, lower-casing and max length: other vectors than embed()'s."""
    import torch

    from fairseq_clear.evaluation.sts.scoring import hub_encoder
    from fairseq_clear.models.inference import embed_batches
    from fairseq_clear.tasks.sts_validation import StsValidator

    hub = prompted[3]
    sts = tmp_path / "sts-dev.csv"
    sts.write_text("".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{i % 5}.0\t{a}\t{b}\n"
                           for i, (a, b) in enumerate(zip(SENTENCES, SENTENCES[1:] + SENTENCES[:1]))))
    validator = StsValidator(str(sts), hub.tokenizer.tokenizer, hub.task.source_dictionary, pooling="mean")
    want = hub.embed(validator.sentences, pooling="mean", normalize=False)
    got = embed_batches(hub.model, validator.batches(hub.model), len(validator.sentences), ("mean",))["mean"]
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    cosines = _cosines(want[validator.rows[:len(SENTENCES)]], want[validator.rows[len(SENTENCES):]])
    from fairseq_clear.preprocessing.sts_readers import spearman

    assert validator.score(hub.model) == pytest.approx(spearman(cosines, validator.pairs.scores))
    np.testing.assert_allclose(hub_encoder(hub, ("mean",))(SENTENCES)["mean"],
                               hub.embed(SENTENCES, pooling="mean", normalize=False), atol=1e-5)
    assert torch.is_tensor(got)


@pytest.mark.parametrize("name", ["cosine", "dot", "euclidean", "manhattan"])
def test_similarity_and_search_score_with_the_models_similarity_function(imported, name):
    """Before, similarity() and search() were cosine whatever the starting model's similarity_fn_name."""
    from sentence_transformers import SimilarityFunction

    hub = imported[3]
    theirs = SimilarityFunction.to_similarity_fn(name)
    pairwise = SimilarityFunction.to_similarity_pairwise_fn(name)
    saved = hub.model.args.sentence_similarity
    try:
        hub.model.args.sentence_similarity = name
        vectors = hub.embed(SENTENCES)
        assert hub.similarity_fn_name == name
        np.testing.assert_allclose(hub.similarity(SENTENCES, SENTENCES[::-1]),
                                   theirs(vectors, vectors[::-1].copy()).numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(hub.similarity(vectors, vectors[::-1].copy(), pairwise=True),
                                   pairwise(vectors, vectors[::-1].copy()).numpy(), rtol=1e-4, atol=1e-4)
        hits = hub.search(SENTENCES[1:], vectors, top_k=2)
        expected = theirs(vectors[1:], vectors).numpy()
        for row, found in zip(expected, hits):
            assert [h["corpus_id"] for h in found] == list(np.argsort(-row, kind="stable")[:2])
            assert found[0]["score"] == pytest.approx(float(row.max()), rel=1e-4, abs=1e-4)
    finally:
        hub.model.args.sentence_similarity = saved


#: texts with special tokens' text inside (HTML's strikethrough tag among them)
SPECIAL_TEXTS = ["<s>", "</s>", "<mask>", "[CLS]", "<s>struck</s>", "a <s>struck</s> word", "[SEP] [MASK] <pad> <unk>",
                 "plain words"]


def _with_fairseq_files_only(imported, out):
    """The import without tokenizer.json: the tokenizer of fairseq's own files (sentencepiece.model,
    encoder.json + vocab.bpe), which reads special-token text as text, as a model trained here does."""
    import shutil

    from fairseq_clear import vocabulary

    shutil.copytree(imported, out)
    (out / "tokenizer.json").unlink()
    (out / vocabulary.RECORD).unlink()
    vocabulary.write_record(str(out), vocabulary.detect(str(out)), str(out / "dict.txt"))
    return out


@pytest.mark.parametrize("kind", ["sentencepiece", "gpt2", "wordpiece"])
def test_tokenizer_json_alone_gives_the_exports_ids(imported, tmp_path, kind):
    """tokenizers.Tokenizer.from_file (what TEI and other Rust runtimes read) gives the ids of the export's
    sentence-transformers tokenizer on literal special-token text: before, '<s>struck</s>' became
    special tokens under tokenizer.json alone and stayed text under sentence-transformers."""
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    from hf_standins import make_bert, make_roberta

    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.export.hf import export
    from fairseq_clear.models.hub_interface import from_pretrained

    if kind == "sentencepiece":
        model = _with_fairseq_files_only(imported[0].parent / "imported", tmp_path / "model")
    else:
        source = (make_roberta if kind == "gpt2" else make_bert)(tmp_path / "hf")
        import_hf(str(source), str(tmp_path / "imported"))
        model = (_with_fairseq_files_only(tmp_path / "imported", tmp_path / "model") if kind == "gpt2"
                 else tmp_path / "imported")
    hub = from_pretrained(str(model), "model.pt", ".")
    export(hub, str(tmp_path / "out"))
    # a special whose characters the sentencepiece model lacks ('/' of '</s>' in the stand-in) stays a
    # special token (named in the card); every other text is compared
    literal = json.loads((tmp_path / "out" / "fairseq_clear_export.json").read_text())["literal_special_tokens"]
    lacking = (literal or {}).get("except", [])
    texts = [t for t in SPECIAL_TEXTS if not any(token in t for token in lacking)]
    assert len(texts) >= 5 and all(token in (tmp_path / "out" / "README.md").read_text() for token in lacking)
    alone = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    st = SentenceTransformer(str(tmp_path / "out"), device="cpu").tokenizer
    assert [alone.encode(t).ids for t in texts] == [st(t)["input_ids"] for t in texts]
    if kind != "wordpiece":  # fairseq's own files read the text as text: so does the export, both ways
        lower = str.lower if hub.lowercase else str  # the stand-in XLM-R lower-cases (do_lower_case)
        assert [st(t)["input_ids"] for t in texts] == [hub.encode(lower(t)).tolist() for t in texts]


@pytest.mark.parametrize("change, message", [
    ({"type": "os.system"}, "modules.json names the module type 'os.system'; only sentence_transformers.*"),
    ({"path": "../elsewhere"}, "modules.json: module path '../elsewhere' is outside the model directory")])
def test_modules_json_has_one_reader(imported, tmp_path, change, message):
    """The import and clear-eval-sts --model read modules.json by one rule (before: the import called a
    foreign class 'no fairseq counterpart' and let a module's path point outside the folder)."""
    import shutil

    from fairseq_clear.evaluation.sts import scoring
    from fairseq_clear.export.from_hf import import_hf

    source = shutil.copytree(imported[0], tmp_path / "model")
    modules = json.loads((source / "modules.json").read_text())
    modules[1].update(change)
    (source / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError) as by_import:
        import_hf(str(source), str(tmp_path / "out"))
    with pytest.raises(ValueError) as by_eval:
        scoring.as_encoder(str(source))
    assert message in str(by_import.value) and message in str(by_eval.value)


@pytest.mark.parametrize("name", ["cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"])
def test_each_pooling_equals_sentence_transformers_and_its_card_snippet(name):
    """Every entry of the table computes what sentence-transformers' Pooling computes for its mode, on
    right-padded rows, and so does its line of the model card's transformers-alone snippet."""
    import torch
    from sentence_transformers.sentence_transformer.modules import Pooling

    from fairseq_clear.models.pooling import POOLINGS, pool

    torch.manual_seed(0)
    hidden = torch.randn(3, 7, 8)
    lengths = torch.tensor([7, 4, 2])
    attention = (torch.arange(7)[None, :] < lengths[:, None]).long()
    entry = POOLINGS[name]
    theirs = Pooling(8, entry.st_mode)({"token_embeddings": hidden, "attention_mask": attention})["sentence_embedding"]
    torch.testing.assert_close(pool(hidden, attention == 0, name), theirs)
    scope = {"torch": torch, "hidden": hidden, "mask": attention.unsqueeze(-1).float()}
    exec(f"vector = {entry.snippet}", scope)
    torch.testing.assert_close(scope["vector"], theirs)
