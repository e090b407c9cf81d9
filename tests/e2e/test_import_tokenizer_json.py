"""clear-import-hf on the folders the installed libraries write today: transformers 5's
``save_pretrained`` and sentence-transformers 6's ``SentenceTransformer.save`` keep RoBERTa's and
XLM-R's tokenizer in tokenizer.json alone (no vocab.json + merges.txt, no sentencepiece.bpe.model).
The import must equal the source (token ids, vectors) and export back (README's import claim)."""

import json
import shutil

import numpy as np
import pytest
import torch

from hf_standins import (hf_ids_of_rows, make_roberta, make_xlmr, saved_by_sentence_transformers, saved_by_transformers,
                         varied_sentences)
from helpers import bin_path, run_cli

#: the module fixture is built once: every test of this file on one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("test_import_tokenizer_json")

pytest.importorskip("transformers")
pytest.importorskip("sentence_transformers")

MAKERS = {"roberta": make_roberta, "xlmr": make_xlmr}
KIND = {"roberta": "gpt2", "xlmr": "sentencepiece"}
#: beyond varied_sentences' accents, CJK, emoji and literal specials: whitespace runs, control and
#: compatibility characters the normalizer rewrites, characters no piece covers. (A literal "<pad>" is
#: read as the padding token by transformers' tokenizer, which fairseq's encoder then masks.)
MORE = ["a  b   c", "\tleading tab", "trailing   ", "\n\nnew\nlines\n", "ﬁ ligature ① Ａｂｃ fullwidth",
        "e\u0301 combining", "zero\u200bwidth \ufeffbom", "\x00ctrl\x07", "한국어 테스트 🙂🙂🙂", "<unk> </s> text"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    out = {}
    for name, make in MAKERS.items():
        plain = saved_by_transformers(make(root / "source" / name), root / name)
        held = {p.name for p in plain.iterdir()}
        assert "tokenizer.json" in held and not held & {"vocab.json", "merges.txt", "sentencepiece.bpe.model"}, held
        out[name] = {"plain": plain, "st": saved_by_sentence_transformers(plain, root / (name + "-st"))}
    return out


def _import(model_dir, out):
    proc = run_cli([bin_path("clear-import-hf"), model_dir, out], check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_save_pretrained_folder_imports_exactly(saved, tmp_path, name):
    """A save_pretrained folder (tokenizer.json only) imports: the token ids equal transformers' on
    varied sentences, the last hidden states within 1e-5; fairseq's tokenizer files are derived."""
    from transformers import AutoModel, AutoTokenizer

    from fairseq_clear.models.hub_interface import from_pretrained

    model_dir = saved[name]["plain"]
    _import(model_dir, tmp_path / "out")
    files = {"roberta": ("encoder.json", "vocab.bpe"), "xlmr": ("sentencepiece.model",)}[name]
    assert all((tmp_path / "out" / f).is_file() for f in files)
    hub = from_pretrained(str(tmp_path / "out"), "model.pt")
    assert hub.tokenizer.tokenizer.kind == KIND[name]
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    hf_of_row = hf_ids_of_rows(hub.task.source_dictionary, tok, KIND[name])
    sentences = varied_sentences(300) + MORE
    ours = hub.tokenizer.encode(sentences)
    differ = [s for s, ids in zip(sentences, ours) if [hf_of_row[i] for i in ids.tolist()] != tok(s)["input_ids"]]
    assert not differ, f"{len(differ)} of {len(sentences)} sentences tokenised differently, e.g. {differ[:3]}"
    ref = AutoModel.from_pretrained(str(model_dir)).eval()
    worst = 0.0
    with torch.no_grad():
        for s in sentences[:20] + MORE:
            ids = hub.tokenizer.encode([s])[0]
            theirs = ref(**tok(s, return_tensors="pt")).last_hidden_state[0]
            worst = max(worst, float((hub.model.sentence_features(ids.unsqueeze(0))[0] - theirs).abs().max()))
    assert worst < 1e-5, worst


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_sentence_transformers_folder_embeds_and_exports_as_sentence_transformers(saved, tmp_path, name):
    """A SentenceTransformer.save folder imports with its mean pooling and Normalize: embed() equals
    sentence-transformers' encode() within 1e-5; clear-export-hf of the import tokenizes as the source
    and encodes as the source within 1e-5."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    from fairseq_clear.models.hub_interface import from_pretrained

    model_dir = saved[name]["st"]
    proc = _import(model_dir, tmp_path / "out")
    assert "mean pooling" in proc.stdout and "Normalize" in proc.stdout, proc.stdout[-2000:]
    sentences = varied_sentences(60) + MORE
    source = SentenceTransformer(str(model_dir), device="cpu").encode(sentences)
    ours = from_pretrained(str(tmp_path / "out"), "model.pt").embed(sentences)
    assert np.abs(ours - source).max() < 1e-5

    run_cli([bin_path("clear-export-hf"), "--checkpoint", tmp_path / "out" / "model.pt",
             "--out", tmp_path / "exported", "--cpu"])
    a, b = AutoTokenizer.from_pretrained(str(model_dir)), AutoTokenizer.from_pretrained(str(tmp_path / "exported"))
    # the export numbers tokens as dict.txt's rows: compare the tokens themselves
    differ = [s for s in sentences if a.convert_ids_to_tokens(a(s)["input_ids"]) != b.convert_ids_to_tokens(b(s)["input_ids"])]
    assert not differ, f"{len(differ)} sentences tokenised differently by the export, e.g. {differ[:3]}"
    exported = SentenceTransformer(str(tmp_path / "exported"), device="cpu").encode(sentences)
    assert np.abs(exported - source).max() < 1e-5


def _other_model(state):
    state["model"]["type"] = {"BPE": "Unigram", "Unigram": "BPE"}[state["model"]["type"]]


def _spaced_merge(state):
    state["model"]["merges"][0] = ["a b", "c"]


def _mask_not_last(state):
    vocab = state["model"]["vocab"]
    vocab[-1], vocab[-2] = vocab[-2], vocab[-1]


def _piece_twice(state):
    vocab = state["model"]["vocab"]
    vocab[5] = list(vocab[6])


CRAFTED = {  # name: (stand-in, edit of tokenizer.json, what the one line says)
    "roberta-unigram": ("roberta", _other_model, "its model is 'Unigram', not RoBERTa's byte-level 'BPE'"),
    "xlmr-bpe": ("xlmr", _other_model, "its model is 'BPE', not XLM-R's sentencepiece 'Unigram'"),
    "spaced-merge": ("roberta", _spaced_merge, "model.merges[0] is not a pair of byte-level tokens"),
    "mask-not-last": ("xlmr", _mask_not_last, "the vocabulary is not XLM-R's"),
    "piece-twice": ("xlmr", _piece_twice, "its Unigram vocabulary is not a sentencepiece model"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_tokenizer_json_that_cannot_be_converted_is_refused(saved, tmp_path, case):
    """A tokenizer.json fairseq's files cannot be derived from exactly is refused before anything is
    written, in one line naming the file."""
    from fairseq_clear.export.from_hf import ImportHfError, import_hf

    name, edit, needle = CRAFTED[case]
    model_dir = tmp_path / name
    shutil.copytree(saved[name]["plain"], model_dir)
    path = model_dir / "tokenizer.json"
    state = json.loads(path.read_text(encoding="utf-8"))
    edit(state)
    path.write_text(json.dumps(state), encoding="utf-8")
    with pytest.raises(ImportHfError) as e:
        import_hf(str(model_dir), str(tmp_path / "out"))
    message = str(e.value)
    assert message.startswith(f"{path}: ") and needle in message and "\n" not in message, message
    assert not (tmp_path / "out").exists()
