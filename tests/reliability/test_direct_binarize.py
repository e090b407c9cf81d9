"""The direct binarizer (preprocessing/direct_binarize.py) against fairseq's own binarizer.

For every tokenizer clear-prepare encodes with (its own sentencepiece; GPT-2 BPE, WordPiece and
XLM-R pieces of an imported model), on sentences with odd whitespace, blank lines, lines that
encode to nothing and pieces dict.txt lacks, with 1 and 2 workers: the .bin/.idx the encoder's ids
make directly are byte-identical to fairseq's binarizer on the text of pieces the encoder writes
(binarize.binarize, itself byte-identical to the fairseq-preprocess console script:
tests/e2e/test_preprocess.py), and the counts agree.
"""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

pytestmark = pytest.mark.xdist_group("test_direct_binarize")

RATES = ("mb_per_s", "mb_per_s_per_worker")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "  spaces   around   and\ttabs\tinside  ",
    "an ideographic\u3000space, a no-break\u00a0space and a line\u2028separator",
    "rare characters: \u16a0\u16a2\u16a6 \u0b95\u0bbe and \U0001f9ec here",
    "",
    "A second document starts here.",
    "   ",
    "\t",
    "",
    "",
    "numbers 12,345.67 and 3.5% of \u00bd",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 Z\u00fcrich",
]


def _sentences(tmp: Path) -> Path:
    import hf_standins

    lines = []
    for k, s in enumerate(hf_standins.varied_sentences(240, seed=7)):
        lines.append(" ".join(s.split()) if s.strip() else "")
        if k % 9 == 8:
            lines.append("")  # a document break
    path = tmp / "train.sent"
    path.write_text("\n".join(SENTENCES + lines + SENTENCES) + "\n", encoding="utf-8")
    return path


def _tokenizer_dir(hf: Path, model_type: str, dest: Path, n: int = 6) -> Path:
    """The tokenizer files, dict.txt and record clear-import-hf writes for ``hf`` (its weights left
    out), with ``n`` frequent symbols taken out of dict.txt (their pieces become <unk>)."""
    from fairseq_clear import vocabulary
    from fairseq_clear.export import from_hf

    _, symbols = from_hf.vocabulary_layout(str(hf), model_type)
    dest.mkdir()
    (dest / "dict.txt").write_text("".join(f"{s} 1\n" for s in symbols[n:]), encoding="utf-8")
    tokenizer = from_hf._copy_tokenizer(str(hf), model_type, str(dest), symbols)
    vocabulary.write_record(str(dest), tokenizer, str(dest / "dict.txt"))
    return dest


def _hf_tokenizer_files(kind: str, dest: Path) -> Path:
    """The tokenizer files of hf_standins' tiny models (trained the same way, no weights)."""
    import hf_standins
    import sentencepiece as spm
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.implementations import BertWordPieceTokenizer

    text = hf_standins._training_text()
    dest.mkdir()
    if kind == "gpt2":
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(text, vocab_size=600, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        bpe.save_model(str(dest))
    elif kind == "bert":
        wp = BertWordPieceTokenizer(lowercase=True)
        wp.train_from_iterator(text, vocab_size=400, min_frequency=1)
        wp.save_model(str(dest))
    else:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_prefix=str(dest / "sentencepiece.bpe"),
                                       vocab_size=300, model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    return dest


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    """kind -> a tokenizer as clear-prepare's encode step gets it (a model file or directory)."""
    from fairseq_clear.preprocessing import encode

    tmp = tmp_path_factory.mktemp("direct")
    sent = _sentences(tmp)
    spm_model = tmp / "sentencepiece.model"
    # a coverage below 1: the rare characters above are <unk>
    encode.train_sentencepiece(str(sent), str(spm_model), 120, "unigram", 10_000, 1, 0.98, "", 1, str(tmp))
    found = {"sentencepiece": spm_model}
    for kind, model_type in (("gpt2", "roberta"), ("bert", "bert"), ("xlmr", "xlm-roberta")):
        found[kind] = _tokenizer_dir(_hf_tokenizer_files(kind, tmp / f"hf-{kind}"), model_type, tmp / f"tok-{kind}")
    return sent, found


def _fairseq_reference(sent, model, dict_path, out, workers):
    """encode → text of pieces → fairseq's binarizer; returns (prefix, stats, its log)."""
    from fairseq_clear.preprocessing import binarize, encode

    text = out / "train.spm"
    stats, _ = encode.encode_file(str(sent), str(text), str(model), 30, "split", "<unk>", workers, False)
    log = binarize.binarize(str(dict_path), {"train": str(text)}, str(out / "bin"), workers)
    return out / "bin" / "train", stats, log


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kind", ["sentencepiece", "gpt2", "bert", "xlmr"])
def test_direct_is_byte_identical_to_fairseqs_binarizer(tokenizers, tmp_path, kind, workers, monkeypatch):
    from fairseq_clear.preprocessing import direct_binarize, encode

    if workers > 1:  # blocks for the workers to share (a file of one block is encoded in this process)
        monkeypatch.setattr(encode, "ENCODE_BLOCK_BYTES", 4096)
    sent, found = tokenizers
    assert os.path.getsize(sent) > 3 * 4096
    model = found[kind]
    if kind == "sentencepiece":
        dict_path = tmp_path / "dict.txt"
        encode.write_dict(str(model), None, str(dict_path))
    else:
        dict_path = model / "dict.txt"
    ref, ref_stats, ref_log = _fairseq_reference(sent, model, dict_path, tmp_path, workers)

    prefix = tmp_path / "train.ids"
    stats, _ = direct_binarize.encode_file(str(sent), str(prefix), str(model), 30, "split", "<unk>", workers, False)
    assert not list(tmp_path.glob("*.tmp-*"))
    assert Path(f"{prefix}.bin").read_bytes() == ref.with_suffix(".bin").read_bytes()
    assert Path(f"{prefix}.idx").read_bytes() == ref.with_suffix(".idx").read_bytes()
    assert {k: v for k, v in stats.items() if k not in RATES + ("replaced", "dictionary_sha256")} == \
        {k: v for k, v in ref_stats.items() if k not in RATES}
    # the data has what the test is about: document breaks, lines that encode to nothing, <unk>
    assert stats["documents"] > 10 and stats["empty_after_encoding"] >= 4 and stats["unk"] > 0, stats

    published = tmp_path / "published"
    published.mkdir()
    log = direct_binarize.publish(str(dict_path), {"train": str(prefix)}, str(published), {"train": stats})
    for name in ("dict.txt", "train.bin", "train.idx"):
        assert (published / name).read_bytes() == (tmp_path / "bin" / name).read_bytes(), name
    # fairseq's summary line (sentences, tokens, replaced share), the path aside
    assert [line.split(": ", 1)[1] for line in log.splitlines()[1:-1]] == \
        [line.split(": ", 1)[1] for line in ref_log.splitlines()[1:-1]]


def test_pieces_with_whitespace_map_as_fairseq_reads_their_text():
    """A piece whose text fairseq would split (or drop) maps to what Dictionary.encode_line makes of it,
    and a piece the dictionary lacks counts as replaced, as fairseq counts it."""
    import numpy as np
    from fairseq.data import Dictionary

    from fairseq_clear.preprocessing import direct_binarize

    d = Dictionary()
    for s in ("a", "b", "c"):
        d.add_symbol(s)
    pieces = ["a", "b c", " ", "zz", "<unk>", "c"]
    m = direct_binarize.IdMap(pieces, d)
    ids = np.array([0, 1, 2, 3, 4, 5, 1], dtype=np.int64)
    want = d.encode_line(" ".join(pieces[i] for i in ids), add_if_not_exist=False, append_eos=False)
    assert m.ids(ids).tolist() == want.tolist()
    assert m.replaced.tolist() == [0, 0, 0, 1, 0, 0]
    # a block's lines packed at once: each line's ids, then </s>, in fairseq's dtype
    lines = [ids, ids[:2], ids[:0], np.array([5, 0], dtype=np.int64)]
    for m in (m, direct_binarize.IdMap(["a", "b", "c", "zz", "<unk>", "c"], d)):  # with and without such pieces
        rows = [np.append(m.ids(line), d.eos()) for line in lines]
        data, sizes = m.pack(lines)
        assert data == np.concatenate(rows).astype(m.dtype).tobytes() and sizes == [len(r) for r in rows]
    assert m.pack([]) == (b"", [])


def test_lines_packed_by_number_are_the_lines_packed_one_by_one():
    """The encoder's lines, referred to by their number in the block (encode.BlockIds), pack as
    IdMap.pack packs them as arrays: end to end (one slice), with gaps (truncated lines: one
    gather), with empty lines and the blank line between documents, and with pieces fairseq splits."""
    import numpy as np
    from fairseq.data import Dictionary

    from fairseq_clear.preprocessing import direct_binarize
    from fairseq_clear.preprocessing.encode import BlockIds

    d = Dictionary()
    for s in ("a", "b", "c", "d"):
        d.add_symbol(s)
    flat = np.array([0, 1, 2, 3, 0, 0, 1, 3, 2, 2], dtype=np.int64)
    # lines 0-3 end to end; 4 truncated (8:10 cut to 8:9); 5 empty; 6 the blank line
    block = BlockIds(flat, np.array([0, 3, 3, 6, 8, 6, 0]), np.array([3, 3, 6, 8, 9, 6, 0]))
    for pieces in (["a", "b", "c", "d"], ["a", "b c", "c", "d"]):
        m = direct_binarize.IdMap(pieces, d)
        for numbers in ([0, 1, 2, 3], [0, 2, 3, 4], [4, 0], [6, 1, 5], [2, 6, 3], [], [5]):
            assert m.pack_lines(block, numbers) == m.pack([block.line(k) for k in numbers]), (pieces, numbers)


def test_clear_prepare_direct_and_fairseq_write_the_same_data_bin(tmp_path):
    """The whole pipeline both ways (sentencepiece trained here): the same data-bin byte for byte,
    the same summary counts; only the direct path leaves no text of pieces; the summary has MB/s."""
    from helpers import synthetic_sentences

    from fairseq_clear.preprocessing.pipeline import format_summary, prepare

    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(synthetic_sentences(200, seed=5)) + "\n", encoding="utf-8")
    options = dict(input_format="lines", documents="lines", vocab_size=120, spm_sample_size=2000,
                   valid_size=10, test_size=5, progress=False, workers=1)
    runs = {b: prepare([str(raw)], str(tmp_path / b), binarizer=b, **options) for b in ("direct", "fairseq")}
    for name in ("dict.txt", "train.bin", "train.idx", "valid.bin", "valid.idx", "test.bin", "test.idx"):
        assert (tmp_path / "direct" / "data-bin" / name).read_bytes() == \
            (tmp_path / "fairseq" / "data-bin" / name).read_bytes(), name
    assert runs["direct"]["splits"] == runs["fairseq"]["splits"]
    assert runs["direct"]["binarized"] == runs["fairseq"]["binarized"]
    assert not list((tmp_path / "direct" / "work").glob("*.spm")) and list((tmp_path / "fairseq" / "work").glob("*.spm"))
    rate = runs["direct"]["rate"]
    assert rate["input_mb"] > 0 and rate["mb_per_s_per_worker"] > 0 and rate["encode_mb_per_s_per_worker"]["train"] > 0
    assert "MB/s per worker" in format_summary(runs["direct"])


def test_encoding_progress_in_a_log_gives_mb_per_s_and_time_left(tokenizers, tmp_path, monkeypatch, caplog):
    import logging

    from fairseq_clear.preprocessing import common, direct_binarize, encode

    sent, found = tokenizers
    monkeypatch.setattr(common, "PROGRESS_LOG_SECONDS", 0.0)
    monkeypatch.setattr(encode, "ENCODE_BLOCK_BYTES", 2000)  # several blocks: lines before the end
    caplog.set_level(logging.INFO)
    direct_binarize.encode_file(str(sent), str(tmp_path / "t"), str(found["sentencepiece"]), 30, "split", "", 1,
                                True, desc="encode (train)")
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("encode (train)")]
    assert any("MB/s" in line and "ETA" in line for line in lines), lines
    assert "MB/s" in lines[-1] and " in " in lines[-1], lines


@pytest.mark.parametrize("kind", ["sentencepiece", "gpt2", "bert", "xlmr"])
def test_rows_of_pairs_and_multitask_are_byte_identical(tokenizers, tmp_path, kind):
    """clear-prepare-pairs' and clear-prepare-multitask's columns: rows of ids written directly
    (direct_binarize.write_rows) against fairseq's binarizer on the text of their pieces."""
    from fairseq_clear.preprocessing import binarize, direct_binarize, encode

    sent, found = tokenizers
    model = found[kind]
    if kind == "sentencepiece":
        dict_path = tmp_path / "dict.txt"
        encode.write_dict(str(model), None, str(dict_path))
    else:
        dict_path = model / "dict.txt"
    encode_ids, pieces = encode.tokenizer_vocabulary(str(model), str(dict_path))[:2]
    lines = [s for s in sent.read_text("utf-8").splitlines() if s.strip()]
    rows = {"train": [encode_ids(s) for s in lines], "valid": [encode_ids(s) for s in lines[:7]]}
    for split, ids in rows.items():
        (tmp_path / f"{split}.spm").write_text("".join(" ".join(pieces[i] for i in r) + "\n" for r in ids), "utf-8")
    binarize.binarize(str(dict_path), {s: str(tmp_path / f"{s}.spm") for s in rows}, str(tmp_path / "ref"), 1)
    direct_binarize.write_rows(str(dict_path), pieces, rows, str(tmp_path / "direct"))
    for name in ("dict.txt", "train.bin", "train.idx", "valid.bin", "valid.idx"):
        assert (tmp_path / "direct" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
