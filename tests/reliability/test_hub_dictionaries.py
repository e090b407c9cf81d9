"""The hub loads a model whose dict.txt fairseq-preprocess built from its corpus (no --srcdict).

fairseq-preprocess keeps only the pieces the corpus used, so many sentencepiece pieces are not
in dict.txt; plain fairseq maps them to <unk>, as training did, and so does the hub (with one
warning giving the share). Only a tokenizer and dictionary that clearly do not belong together
(most of dict.txt's symbols unknown to the tokenizer) are refused, naming both files.
"""

import logging
import random
import shutil

import pytest

import fairseq_clear  # noqa: F401
from fairseq_clear.models import ClearRobertaModel
from fairseq_clear.models.hub_interface import HubLoadError
from helpers import bin_path, make_binarized, run_cli, synthetic_sentences, train_args


@pytest.fixture(scope="module")
def preprocessed(tmp_path_factory):
    """(model dir, data dir): sentencepiece of 200 pieces, dict.txt from 40 lines of the corpus."""
    import sentencepiece as spm

    work = tmp_path_factory.mktemp("preprocessed")
    lines = synthetic_sentences(600, seed=21)
    (work / "corpus.txt").write_text("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.train(input=str(work / "corpus.txt"), model_prefix=str(work / "sp"),
                                   vocab_size=200, model_type="unigram", minloglevel=2, hard_vocab_limit=False)
    sp = spm.SentencePieceProcessor(model_file=str(work / "sp.model"))
    (work / "train.spm").write_text("\n".join(" ".join(sp.encode(s, out_type=str)) for s in lines[:40]) + "\n")
    data = work / "bin"
    run_cli([bin_path("fairseq-preprocess"), "--only-source", "--trainpref", work / "train.spm",
             "--validpref", work / "train.spm", "--destdir", data, "--workers", "1"])
    shutil.copy(work / "sp.model", data / "sentencepiece.model")
    run_cli(train_args(data, work / "save", max_update=2))
    return work / "save", data


def test_pieces_missing_from_dict_txt_become_unk_as_in_training(preprocessed, caplog):
    save, data = preprocessed
    with caplog.at_level(logging.WARNING):
        hub = ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(data))
    warnings = [r.getMessage() for r in caplog.records if "become <unk>" in r.getMessage()]
    assert len(warnings) == 1 and str(data / "dict.txt") in warnings[0], warnings
    share = hub.tokenizer.missing_share()
    assert 0.05 < share < 1 and f"{100 * share:.1f}%" in warnings[0]
    # the same ids as fairseq's own path (bpe, then Dictionary.encode_line), <unk> included
    sentences = synthetic_sentences(30, seed=99) + ["Zebras quietly juggle xylophones."]
    ours = hub.tokenizer.encode(sentences)
    unk = hub.task.source_dictionary.unk()
    assert any((t == unk).any() for t in ours), "the check needs pieces that are not in dict.txt"
    for sentence, tokens in zip(sentences, ours):
        assert hub.encode(sentence).tolist() == tokens.tolist(), sentence
    vectors = hub.embed(sentences)
    assert vectors.shape == (len(sentences), hub.dim)


def test_a_sentencepiece_model_of_other_text_is_refused_naming_both_files(preprocessed, tmp_path):
    save, data = preprocessed
    rng = random.Random(1)
    words = lambda: " ".join("".join(rng.choice("qxzjkvwy") for _ in range(rng.randint(3, 8)))  # noqa: E731
                             for _ in range(6))
    other = make_binarized(tmp_path / "other", [words() for _ in range(300)], [words()], vocab_size=120)
    with pytest.raises(HubLoadError, match="do not belong together") as info:
        ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(data),
                                          sentencepiece_model=str(other / "sentencepiece.model"))
    assert str(other / "sentencepiece.model") in str(info.value) and str(data / "dict.txt") in str(info.value)


def test_a_gpt2_dictionary_with_a_sentencepiece_model_is_refused(preprocessed, tmp_path):
    save, data = preprocessed
    gpt2 = tmp_path / "gpt2-data"
    shutil.copytree(data, gpt2)
    n = sum(1 for _ in open(data / "dict.txt", encoding="utf-8"))
    # GPT-2 BPE dictionaries (fairseq's roberta.base) list encoder ids; same size, so the weights load
    (gpt2 / "dict.txt").write_text("".join(f"{i} {1000 - i}\n" for i in range(n)))
    with pytest.raises(HubLoadError, match="do not belong together") as info:
        ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(gpt2))
    assert str(gpt2 / "dict.txt") in str(info.value) and "sentencepiece.model" in str(info.value)
