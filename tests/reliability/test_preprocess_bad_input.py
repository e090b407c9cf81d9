"""Bad input: each kind is handled, counted in the summary, and never dropped silently."""

import re
import numpy as np
import pytest

from helpers import synthetic_sentences

from fairseq_clear.preprocessing import encode as encode_mod
from fairseq_clear.preprocessing import text as text_mod
from fairseq_clear.preprocessing.pipeline import prepare

TOKENS_PER_SAMPLE = 64
# long words: the 10 MB line stays a few hundred thousand tokens, so that the real
# fairseq-preprocess binarizes it in seconds
WORDS = ("international responsibility extraordinary characteristics neighbourhood "
         "understanding communication environmental").split()


def long_line(n_bytes: int) -> str:
    """One line of about ``n_bytes`` of words with no sentence end anywhere."""
    words = (WORDS * (n_bytes // 50 + 1))
    text = " ".join(words)
    return text[: text.rfind(" ", 0, n_bytes)]


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    good = synthetic_sentences(300, seed=11)
    files = {}

    def add(name, data: bytes):
        files[name] = d / name
        files[name].write_bytes(data)

    add("good.txt", ("\n\n".join(" ".join(good[i:i + 3]) for i in range(0, 300, 3)) + "\n").encode())
    add("empty.txt", b"")
    add("blank_only.txt", b"\n   \n\t\n\n")
    # a WikiText article with a title and no text at all, then a real one
    add("article.tokens", b" \n = Empty Article = \n \n \n \n = Real Article = \n \n"
        b" = = Section = = \n \n The river is long . It has 3 @,@ 000 fish . \n")
    add("invalid_utf8.txt", b"A good line here.\nA bad \xff\xfe line here.\n\nAnother \xc3 bad one.\n")
    add("nul.txt", b"Hello\x00 world is here.\n\x00\x00\x00\nSecond\x00 line is fine.\n")
    add("crlf.txt", b"Line one is here.\r\nLine two is here.\nLine three is here.\r\n")
    sentence_600 = " ".join(WORDS * 75) + "."
    add("long_sentence.txt", (sentence_600 + "\n").encode())
    ten_mb = long_line(10 * 1024 * 1024)
    add("ten_mb_line.txt", (ten_mb + "\n").encode())
    add("valid.txt", ("\n\n".join(synthetic_sentences(30, seed=12)) + "\n").encode())

    order = ["good.txt", "empty.txt", "blank_only.txt", "article.tokens", "invalid_utf8.txt",
             "nul.txt", "crlf.txt", "long_sentence.txt", "ten_mb_line.txt"]
    out = tmp_path_factory.mktemp("bad_out")
    summary = prepare([str(files[n]) for n in order], str(out), valid=[str(files["valid.txt"])],
                      test_size=0, vocab_size=200, tokens_per_sample=TOKENS_PER_SAMPLE,
                      punkt_sample_chars=50_000, spm_sample_size=5000, workers=2, progress=False,
                      binarizer="fairseq")  # the tests read the text of pieces (work/train.spm)
    return {"dir": d, "files": files, "out": out, "summary": summary, "ten_mb": ten_mb,
            "sentence_600": sentence_600}


def sentences_of(bad):
    return (bad["out"] / "work" / "train.inputs.sent").read_text(encoding="utf-8").split("\n")


def binarized_train(bad):
    from fairseq.data import Dictionary, data_utils

    data_bin = bad["out"] / "data-bin"
    d = Dictionary.load(str(data_bin / "dict.txt"))
    ds = data_utils.load_indexed_dataset(str(data_bin / "train"), d)
    return [ds[i].numpy() for i in range(len(ds))]


def test_empty_files_are_reported_and_skipped(bad):
    s = bad["summary"]
    assert s["inputs"]["train"]["empty_files"] == [str(bad["files"]["empty.txt"])]
    assert any("empty.txt" in w and "is empty" in w for w in s["warnings"])


def test_blank_only_files_and_documents_make_no_empty_documents(bad):
    s = bad["summary"]
    assert s["inputs"]["train"]["blank_only_files"] == [str(bad["files"]["blank_only.txt"])]
    # the WikiText article with a title and nothing else
    assert s["documents_without_sentences"]["train"] == 1
    assert s["lines"]["dropped"]["documents_without_sentences"] == 1
    assert s["lines"]["dropped"]["wikitext_title_line"] == 2
    assert s["lines"]["dropped"]["wikitext_heading_line"] == 1
    lines = sentences_of(bad)
    assert lines[0] != "" and lines[-1] == ""  # no leading blank line; file ends with \n
    assert not any(a == b == "" for a, b in zip(lines, lines[1:-1]))  # no empty documents
    assert "The river is long ." in lines and "It has 3,000 fish ." in lines
    # the binarized data holds no two document breaks in a row either
    items = binarized_train(bad)
    breaks = [i for i, t in enumerate(items) if len(t) == 1]
    assert breaks and all(b - a > 1 for a, b in zip(breaks, breaks[1:]))
    assert len(breaks) == s["splits"]["train"]["documents"] - 1


def test_invalid_utf8_is_replaced_and_counted(bad):
    s = bad["summary"]
    assert s["lines"]["altered"]["invalid_utf8_replaced"] == 2
    lines = sentences_of(bad)
    assert "A bad \ufffd\ufffd line here." in lines and "A good line here." in lines


def test_invalid_utf8_drop_option_drops_and_counts(bad, tmp_path):
    f = bad["files"]["invalid_utf8.txt"]
    options = dict(formats={str(f): "text"}, documents="blank-lines", wikitext_headings="drop",
                   wikitext_markers="join", invalid_utf8="drop")
    stats = text_mod.split_files([str(f)], str(tmp_path / "out.sent"), options, None, 1, False)
    assert stats["lines"]["dropped"] == {"invalid_utf8": 2, "documents_without_sentences": 1}
    assert (tmp_path / "out.sent").read_text("utf-8") == "A good line here.\n"
    assert stats["documents"] == 1 and stats["documents_without_sentences"] == 1


def test_nul_bytes_are_removed_and_counted(bad):
    s = bad["summary"]
    assert s["lines"]["altered"]["nul_bytes_removed"] == 3  # two text lines and a NUL-only line
    assert s["lines"]["dropped"]["empty_after_cleaning"] == 1  # the NUL-only line
    lines = sentences_of(bad)
    assert "Hello world is here." in lines and "Second line is fine." in lines
    assert not any("\x00" in line for line in lines)


def test_mixed_crlf_is_normalised_and_counted(bad):
    s = bad["summary"]
    assert s["lines"]["normalized"]["crlf_line_ending"] == 2
    lines = sentences_of(bad)
    assert {"Line one is here.", "Line two is here.", "Line three is here."} <= set(lines)
    assert not any("\r" in line for line in lines)
    spm_text = (bad["out"] / "work" / "train.spm").read_bytes()
    assert b"\r" not in spm_text


def test_ten_megabyte_line_is_kept_whole_in_sample_sized_lines(bad):
    """The 10 MB line survives: cut for Punkt and into --tokens-per-sample lines, all counted,
    and its lines decode back to exactly the original text."""
    import sentencepiece as spm

    s = bad["summary"]
    assert s["lines"]["altered"]["long_paragraph_cut_before_sentence_splitting"] == 1
    items = binarized_train(bad)
    assert max(len(t) for t in items) - 1 <= TOKENS_PER_SAMPLE - 2  # body + </s>
    # the 10 MB file is the last document
    breaks = [i for i, t in enumerate(items) if len(t) == 1]
    last_doc = items[breaks[-1] + 1:]
    sp = spm.SentencePieceProcessor(model_file=str(bad["out"] / "data-bin" / "sentencepiece.model"))
    ids = np.concatenate([t[:-1] for t in last_doc]) - 1  # fairseq id = spm id + 1
    assert sp.decode(ids.tolist()) == bad["ten_mb"]
    # split at word starts into full-size lines (each word here is one piece)
    assert np.median([len(t) - 1 for t in last_doc]) == TOKENS_PER_SAMPLE - 2


def test_sentences_longer_than_tokens_per_sample_are_split_and_counted(bad):
    import sentencepiece as spm

    s = bad["summary"]["splits"]["train"]
    sp = spm.SentencePieceProcessor(model_file=str(bad["out"] / "data-bin" / "sentencepiece.model"))
    sents = [x for x in sentences_of(bad) if x]
    too_long = [x for x in sents if len(sp.encode(x)) > TOKENS_PER_SAMPLE - 2]
    assert len(too_long) >= 2  # the 600-word sentence and the pieces of the 10 MB line
    assert s["long_sentences_split"] == len(too_long)
    assert s["extra_lines_from_splitting"] >= len(too_long)
    assert s["sentences"] == len(sents) + s["extra_lines_from_splitting"]
    assert bad["summary"]["lines"]["altered"]["long_sentence_split"] == len(too_long)


def test_truncate_option_truncates_and_counts(bad, tmp_path):
    work = bad["out"] / "work"
    stats, counts = encode_mod.encode_file(
        str(work / "train.inputs.sent"), str(tmp_path / "t.spm"), str(work / "sentencepiece.model"),
        TOKENS_PER_SAMPLE - 2, "truncate", "", workers=1, enabled_progress=False)
    split = bad["summary"]["splits"]["train"]
    assert stats["long_sentences_truncated"] == split["long_sentences_split"]
    assert stats["tokens_truncated"] > 0 and stats["long_sentences_split"] == 0
    assert stats["sentences"] == split["sentences"] - split["extra_lines_from_splitting"]
    lines = (tmp_path / "t.spm").read_text("utf-8").splitlines()
    assert max(len(line.split()) for line in lines) == TOKENS_PER_SAMPLE - 2
    assert counts.sum() == stats["tokens"]


def test_block_size_and_workers_do_not_change_the_output(bad, tmp_path):
    """Documents, titles and dropped lines that straddle the workers' blocks come out the
    same as from one block in one process."""
    import json

    files = [str(bad["files"][n]) for n in ("good.txt", "empty.txt", "blank_only.txt",
                                           "article.tokens", "invalid_utf8.txt", "nul.txt",
                                           "crlf.txt")]
    options = dict(formats={f: text_mod.detect_format(f) for f in files}, documents="blank-lines",
                   wikitext_headings="drop", wikitext_markers="join", invalid_utf8="replace")
    punkt = json.loads((bad["out"] / "work" / "punkt.json").read_text())
    ref = text_mod.split_files(files, str(tmp_path / "ref.sent"), options, punkt, 1, False,
                               block_bytes=1 << 20)
    small = text_mod.split_files(files, str(tmp_path / "small.sent"), options, punkt, 2, False,
                                 block_bytes=40)
    assert small == ref and ref["documents"] > 100
    assert (tmp_path / "small.sent").read_bytes() == (tmp_path / "ref.sent").read_bytes()


def test_a_damaged_sentencepiece_model_and_an_empty_mrpc_file_are_one_line_each(tmp_path):
    """Both gave a traceback (sentencepiece's "could not parse ModelProto", an IndexError)."""
    from fairseq_clear.preprocessing import pairs
    from fairseq_clear.preprocessing.common import PrepareError
    from fairseq_clear.vocabulary import SentencepieceTokenizer, TokenizerError

    model = tmp_path / "sentencepiece.model"
    model.write_bytes(b"garbage\n")
    with pytest.raises(TokenizerError) as e:
        SentencepieceTokenizer(str(model))
    assert str(e.value).startswith(f"cannot read sentencepiece model '{model}'") and "\n" not in str(e.value)
    empty = tmp_path / "msr_paraphrase_train.txt"
    empty.write_text("")
    with pytest.raises(PrepareError, match=f"^'{empty}' is empty$"):
        pairs.read_mrpc(str(empty), pairs.Rows())


def test_a_file_given_twice_or_also_as_valid_and_bad_worker_counts_are_refused(tmp_path):
    """A file twice in RAW (its documents twice) or both a training input and --valid (evaluated on what
    it trained on) is refused, named, before any step; clear-prepare-pairs and -multitask refuse
    --workers 0 and a negative --limit-train as clear-prepare does (they were taken as given)."""
    from fairseq_clear.cli import prepare_multitask, prepare_pairs
    from fairseq_clear.preprocessing.common import PrepareError
    from fairseq_clear.preprocessing.pipeline import prepare

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("A sentence here.\nAnother one there.\n")
    for inputs, extra, message in (([corpus, corpus], {}, f"RAW: '{corpus}' is also given as RAW"),
                                   ([corpus], {"valid": [str(corpus)]}, f"--valid: '{corpus}' is also given as RAW")):
        with pytest.raises(PrepareError, match="^" + re.escape(message)):
            prepare([str(p) for p in inputs], str(tmp_path / "out"), valid_size=0, test_size=0, **extra)
        assert not (tmp_path / "out" / "data-bin").exists()
    for parser, argv in ((prepare_pairs.build_parser(), ["--train", "t", "--data", "d", "--out", "o", "--workers", "0"]),
                         (prepare_multitask.build_parser(), ["--out", "o", "--limit-train", "-50"])):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)


def test_a_line_of_unicode_whitespace_is_a_blank_line_and_ends_a_document(tmp_path):
    """Scraped HTML's &nbsp; paragraphs (NBSP, U+3000, ...): clean_line leaves nothing of such a line, so
    it is blank, as a line of ASCII spaces is: it ends a document (it used to join two documents), it is
    counted as blank, and --valid of such lines only holds no text."""
    import sys

    from fairseq_clear.preprocessing.pipeline import holds_text

    derived = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace() and chr(c) not in " \t\n\r\x0b\x0c")
    assert text_mod.UNICODE_SPACES == derived  # Python's own table
    for c in derived:
        assert text_mod.is_blank(c.encode("utf-8")) and text_mod.is_blank(f" {c}\t{c}{c} ".encode("utf-8"))
    for line in ("a", "\u200b", "\ufeff", "\xa0a\xa0"):  # zero-width space and BOM are not whitespace
        assert not text_mod.is_blank(line.encode("utf-8"))
    assert not text_mod.is_blank(b"\xa0")  # a Latin-1 byte, not UTF-8: invalid, replaced, kept as text
    f = tmp_path / "scraped.txt"
    f.write_bytes("First document here.\n\xa0\nSecond document here.\n\u3000 \u2003\nThird one here.\n"
                  .encode("utf-8"))
    options = dict(formats={str(f): "text"}, documents="blank-lines", wikitext_headings="drop",
                   wikitext_markers="join", invalid_utf8="replace")
    stats = text_mod.split_files([str(f)], str(tmp_path / "out.sent"), options, None, 1, False)
    assert stats["documents"] == 3
    assert (tmp_path / "out.sent").read_text("utf-8") == \
        "First document here.\n\nSecond document here.\n\nThird one here.\n"
    assert stats["input"]["blank_lines"] == 2
    assert stats["lines"]["normalized"] == {"unicode_whitespace_line_as_blank_line": 2}
    nbsp = tmp_path / "nbsp.txt"
    nbsp.write_bytes(("\xa0 \u3000\n" * 400_000).encode("utf-8"))  # > 1 MB: characters cut between blocks
    assert not holds_text(str(nbsp))
    nbsp.write_bytes(("\xa0\n" * 400_000 + "text\n").encode("utf-8"))
    assert holds_text(str(nbsp))


def test_the_progress_bar_counts_megabytes_as_the_summary_does():
    """The bar's MB and MB/s are the summary's (10^6 bytes), not MiB under the name MB."""
    from fairseq_clear.preprocessing.common import progress

    bar = progress(total=25_221_220, desc="sentences", enabled=True)
    bar.update(25_221_220)
    assert "25.2M/25.2M" in str(bar)
    bar.close()


def test_a_file_saved_with_a_byte_order_mark_is_read_as_without_one(tmp_path):
    """Excel and Notepad save CSV/TSV with a UTF-8 BOM: SimCSE's csv was refused ("expected a header
    'sent0,sent1', got ['\\ufeffsent0', ...]"), a jsonl's first row was skipped as malformed, Quora's
    and SICK's header columns were not found."""
    import json as json_mod

    from fairseq_clear.preprocessing import pairs
    from fairseq_clear.preprocessing.sts_readers import read_sick

    bom = "\ufeff"
    csv_path = tmp_path / "pairs.csv"
    csv_path.write_text(bom + "sent0,sent1,hard_neg\na cat sat,a cat was sitting,a dog ran\n", encoding="utf-8")
    rows = pairs.Rows()
    pairs.read_simcse_csv(str(csv_path), rows, None)
    assert rows.triples == [("a cat sat", "a cat was sitting", "a dog ran")]
    nli = tmp_path / "nli.jsonl"
    nli.write_text(bom + json_mod.dumps({"gold_label": "entailment", "sentence1": "a b", "sentence2": "c d"}) + "\n",
                   encoding="utf-8")
    rows = pairs.Rows()
    pairs.read_nli_jsonl(str(nli), rows)
    assert rows.read == 1 and not rows.skipped, rows.skipped
    quora = tmp_path / "quora.tsv"
    quora.write_text(bom + "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n0\t1\t2\tis it?\tis that so?\t1\n",
                     encoding="utf-8")
    rows = pairs.Rows()
    pairs.read_quora(str(quora), rows)
    assert rows.read == 1 and not rows.skipped, rows.skipped
    sick = tmp_path / "SICK_test.txt"
    sick.write_text(bom + "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    "1\ta man runs\ta person runs\t4.5\tENTAILMENT\n", encoding="utf-8")
    assert list(read_sick(str(sick)).scores) == [4.5]
