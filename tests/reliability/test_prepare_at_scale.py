"""clear-prepare at scale (issue 43): the direct binarizer killed and resumed; clear-glue's and the
rows' commands on the direct path, in parallel; the sentence splitter's shortcuts give nltk Punkt's
sentences exactly; the batched encoder writes what the line-by-line one wrote; the read-back check
holds no file in memory."""

import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli, shared, synthetic_sentences, write_dict_from_spm


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory):
    """A sentencepiece model and its dict.txt (a data directory's tokenizer)."""
    import sentencepiece as spm

    d = tmp_path_factory.mktemp("spm")
    (d / "text.txt").write_text("\n".join(synthetic_sentences(300, 0)) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(d / "text.txt"), model_prefix=str(d / "sentencepiece"), vocab_size=120,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2,
                                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    write_dict_from_spm(str(d / "sentencepiece.model"), str(d / "dict.txt"))
    (d / "text.txt").unlink()
    return d


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---- the direct binarizer killed mid-way ----------------------------------------------

#: ``python -c``: clear-prepare SIGKILLed at the direct binarizer's Nth block written into train.ids.bin
KILL_AT_BLOCK = """
import os, signal, sys
from fairseq_clear.preprocessing import direct_binarize, encode
from fairseq_clear.cli.prepare import main

encode.ENCODE_BLOCK_BYTES = 2048  # many blocks
write, done = direct_binarize._Sink.write, [0]

def killing_write(self, packed):
    done[0] += 1
    if done[0] > int(sys.argv[1]) and "train" in self.builder._data_file.name:
        os.kill(os.getpid(), signal.SIGKILL)
    return write(self, packed)

direct_binarize._Sink.write = killing_write
main(sys.argv[2:])
"""


def test_a_kill_mid_binarize_resumes_to_the_same_files_and_leaves_no_temp_files(tmp_path):
    from fairseq_clear.preprocessing.common import StepMarkers
    from fairseq_clear.preprocessing.pipeline import prepare

    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(synthetic_sentences(2500, seed=9)) + "\n", encoding="utf-8")
    options = dict(input_format="lines", documents="lines", vocab_size=120, spm_sample_size=2000, valid_size=10.0,
                   test_size=0.0)
    args = [str(raw), str(tmp_path / "out"), "--input-format", "lines", "--documents", "lines", "--vocab-size", "120",
            "--spm-sample-size", "2000", "--valid-size", "10", "--test-size", "0", "--workers", "1", "--no-progress"]
    killed = run_cli([sys.executable, "-c", KILL_AT_BLOCK, "3", *args], check=False)
    assert killed.returncode != 0 and "Traceback" not in killed.stdout, killed.stdout[-2000:]
    work = tmp_path / "out" / "work"
    torn = [p.name for p in work.iterdir() if ".tmp-" in p.name]
    assert any(n.startswith(".train.ids.bin.tmp-") for n in torn), torn  # killed while writing train.ids.bin
    assert not (work / "train.ids.bin").exists()
    assert not StepMarkers(str(work / "steps"), str(work.parent)).load("encode-train")
    assert not (tmp_path / "out" / "data-bin" / "train.bin").exists()

    # the same run again (the command's options: the same fingerprints)
    resumed = prepare([str(raw)], str(tmp_path / "out"), workers=1, progress=False, **options)
    status = {n: st["status"] for n, st in resumed["steps"].items()}
    assert status["sentences-train"] != "ran" and status["spm"] != "ran", status
    assert status["encode-train"] == "ran" and status["binarize"] == "ran", status
    left = [str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*") if ".tmp-" in p.name]
    assert not left, left

    # an uninterrupted run (2 workers) writes the same data-bin, byte for byte
    prepare([str(raw)], str(tmp_path / "whole"), workers=2, progress=False, **options)
    for name in ("dict.txt", "train.bin", "train.idx", "valid.bin", "valid.idx"):
        assert (tmp_path / "out" / "data-bin" / name).read_bytes() == \
            (tmp_path / "whole" / "data-bin" / name).read_bytes(), name


# ---- clear-glue: input0/input1 from the encoder's ids -----------------------------------

def test_glue_split_bin_writes_what_fairseq_preprocess_writes_for_its_text(spm_dir, tmp_path):
    from multitask_helpers import write_glue

    from fairseq_clear.evaluation.glue.finetune import split_task
    from fairseq_clear.preprocessing.binarize import binarize

    glue = write_glue(tmp_path, sizes=(("train", 40), ("dev", 12)))
    dev = (glue / "MRPC" / "dev.tsv").read_text("utf-8")
    (glue / "MRPC" / "test.tsv").write_text(dev + "1\t1\t2\ta line with \u3000odd\tspaces and z\u00fcrich \u16a0\n",
                                            "utf-8")
    dict_path = spm_dir / "dict.txt"
    counts = split_task(str(glue), "MRPC", str(spm_dir / "sentencepiece.model"), str(tmp_path / "raw"),
                        str(tmp_path / "bin"), str(dict_path))
    assert counts == {"train": 40, "dev": 12, "test": 13}
    for column in ("input0", "input1"):
        # what examples/glue/prepare.sh ran: fairseq-preprocess --only-source --srcdict on the split's text
        binarize(str(dict_path), {s: str(tmp_path / "raw" / f"{f}.{column}")
                                  for s, f in (("train", "train"), ("valid", "dev"), ("test", "test"))},
                 str(tmp_path / "ref" / column), 1)
        assert _tree(tmp_path / "bin" / column) == _tree(tmp_path / "ref" / column), column

    from fairseq_clear.cli import glue as glue_cli

    with pytest.raises(SystemExit, match="^error: --bin and --dict go together"):
        glue_cli.main(["split", str(glue), "MRPC", str(spm_dir / "sentencepiece.model"), str(tmp_path / "raw2"),
                       "--bin", str(tmp_path / "bin2")])
    assert not (tmp_path / "raw2").exists()


# ---- --workers of clear-prepare-pairs and clear-prepare-multitask -----------------------

def _record_workers(monkeypatch):
    from fairseq_clear.preprocessing import encode

    used, real = [], encode.ordered_parallel_map

    def recording(fn, items, workers, *args, **kwargs):
        used.append(workers)
        return real(fn, items, workers, *args, **kwargs)

    monkeypatch.setattr(encode, "ordered_parallel_map", recording)
    return used


def test_the_encoder_starts_no_more_workers_than_the_file_has_blocks(spm_dir, tmp_path, monkeypatch):
    """A split of one block (a small valid file) is encoded in this process; a larger one by at most
    one worker per block; the files are the same."""
    from fairseq_clear.preprocessing import direct_binarize, encode

    used = _record_workers(monkeypatch)
    sent = tmp_path / "s.sent"
    sent.write_text("\n".join(synthetic_sentences(400, 2)) + "\n", encoding="utf-8")
    size = sent.stat().st_size
    written = {}
    for block, workers in ((1 << 20, 4), (size // 3 + 1, 4), (size // 3 + 1, 2)):
        monkeypatch.setattr(encode, "ENCODE_BLOCK_BYTES", block)
        prefix = tmp_path / f"{block}-{workers}"
        direct_binarize.encode_file(str(sent), str(prefix), str(spm_dir / "sentencepiece.model"), 30, "split", "",
                                    workers, False)
        written[block, workers] = (Path(f"{prefix}.bin").read_bytes(), Path(f"{prefix}.idx").read_bytes())
    assert used == [1, 3, 2]
    assert len(set(written.values())) == 1


def test_pairs_and_multitask_encode_in_workers_and_write_the_same_files(spm_dir, tmp_path, monkeypatch):
    from multitask_helpers import write_glue

    from fairseq_clear.cli import prepare_multitask, prepare_pairs
    from fairseq_clear.preprocessing import multitask, pairs

    sents = synthetic_sentences(2600, seed=4)
    csv = tmp_path / "nli.csv"
    csv.write_text("sent0,sent1,hard_neg\n" + "".join(f"{sents[i]},{sents[i + 1]},{sents[i + 2]}\n"
                                                       for i in range(0, 2400, 3)), "utf-8")
    glue = write_glue(tmp_path)
    used = _record_workers(monkeypatch)
    for workers in (1, 2):
        pairs.prepare(prepare_pairs.build_parser().parse_args(
            ["--train", str(csv), "--data", str(spm_dir), "--sentencepiece-model", str(spm_dir / "sentencepiece.model"),
             "--out", str(tmp_path / f"pairs{workers}"), "--workers", str(workers)]))
        multitask.prepare(prepare_multitask.build_parser().parse_args(
            ["--glue-dir", str(glue), "--paraphrase", "MRPC", "--tokenizer-from", str(spm_dir),
             "--out", str(tmp_path / f"mt{workers}"), "--workers", str(workers)]))
    assert 2 in used and 1 in used, used  # the rows were encoded by --workers processes
    for name in ("pairs", "mt"):
        one, two = _tree(tmp_path / f"{name}1"), _tree(tmp_path / f"{name}2")
        assert any(k.endswith(".bin") for k in one) and one == two, name


# ---- the sentence splitter: nltk Punkt's sentences, faster -----------------------------

#: sentences Punkt decides with its abbreviations, initials, ellipses, numbers and quotes
HARD = [
    "Dr. Smith met Mr. J. R. R. Tolkien at 5 p.m. on Jan. 3. They talked.",
    "It cost $3.50, i.e. 3.5 dollars... Then he left! Did he? Yes.",
    "He said \"Stop.\" Then (quietly.) she went. 'Really?' he asked.",
    "The U.S. army, e.g. in 1945, was large. The U.K. was not.",
    "See p. 12 ff. and vol. 3, no. 4. Next sentence here.",
    "Wait . . . what? He said: \u201cno.\u201d And left\u2026 Fine.",
    "version 2.0.1 of a.b.c is out.It has no space after the period. Odd",
    "no sentence end at all here, only commas, colons: and semicolons; fine",
    "A. B. C. D. E.",
    "!!! ??? ... .",
    "Mr.",
    "The end.\u201d \u2019Tis the season.) [Ref. 4.] Done.",
    "Very bad acting!!! I promise. (Sent1.) Sent2. x.y.z. Ok?! Yes.)",  # overlapping candidates
    "Tabs\there. And\nnew lines.\tToo?\r\nYes.\x0b\x0cEnd .  Two  spaces .",  # nltk's other whitespace
    " . .. a. b .c. ",
]


def _punkt_params(text: str):
    from nltk.tokenize.punkt import PunktTrainer

    from fairseq_clear.preprocessing import text as text_mod

    trainer = PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(text, finalize=True)
    params = text_mod.punkt_params_to_json(trainer.get_params())
    params["abbrev_types"] = sorted(set(params["abbrev_types"]) | {"dr", "mr", "jan", "e.g", "i.e", "p", "vol", "no"})
    return params


def _punkt(params, lines):
    """nltk's own Punkt, as SentenceSplitter keeps its sentences (stripped, none empty)."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    from fairseq_clear.preprocessing import text as text_mod

    plain = PunktSentenceTokenizer(text_mod.punkt_params_from_json(params))
    return [[s.strip() for s in plain.tokenize(line) if s.strip()] for line in lines]


def test_the_splitter_is_punkt_on_hard_cases_and_skips_it_where_no_sentence_can_end(monkeypatch):
    from fairseq_clear.preprocessing import text as text_mod
    from fairseq_clear.preprocessing.common import LineReport

    params = _punkt_params("\n".join(HARD * 3 + synthetic_sentences(200, seed=2)))
    splitter = text_mod.SentenceSplitter(params)
    assert [splitter.split(line, LineReport()) for line in HARD] == _punkt(params, HARD)

    tokenize = splitter.tokenizer.tokenize
    monkeypatch.setattr(splitter.tokenizer, "tokenize", lambda text: pytest.fail(f"Punkt ran on {text!r}"))
    assert splitter.split("no end here, only commas \u2014 and dashes ", LineReport()) == \
        ["no end here, only commas \u2014 and dashes"]
    monkeypatch.setattr(splitter.tokenizer, "tokenize", tokenize)

    # each candidate's decision is Punkt's, made once for a recurring context
    line = "It rained . The game stopped . The crowd left . The end ."
    want = _punkt(params, [line])[0]
    calls = []
    base = type(splitter.tokenizer).__mro__[1].text_contains_sentbreak
    monkeypatch.setattr(type(splitter.tokenizer).__mro__[1], "text_contains_sentbreak",
                        lambda self, text: calls.append(text) or base(self, text))
    splitter.tokenizer.memo.clear()
    assert splitter.split(line, LineReport()) == want
    assert len(calls) == len(set(calls)) and calls.count(". The") <= 1, calls


def test_the_splitter_runs_punkts_pattern_under_nltks_time_limit(monkeypatch):
    """The splitter runs nltk's candidate pattern itself (not through nltk's wrapping generator):
    nltk's wall-clock limit still applies, and a paragraph past it is cut and counted, as before."""
    from nltk import redos

    from fairseq_clear.preprocessing import text as text_mod
    from fairseq_clear.preprocessing.common import LineReport

    paragraph = " ".join(synthetic_sentences(400, seed=1))[:15000]
    params = _punkt_params(paragraph)
    report = LineReport()
    assert text_mod.SentenceSplitter(params).split(paragraph, report) == _punkt(params, [paragraph])[0]
    assert not report.to_dict()["altered"]
    monkeypatch.setattr(redos, "DEFAULT_TIMEOUT", 1e-7)
    pieces = text_mod.SentenceSplitter(params).split(paragraph, report)
    assert report.to_dict()["altered"] == {"sentence_splitter_timeout_fallback_cut": 1}
    assert " ".join(pieces) == paragraph


def test_cleaning_collapses_whitespace_as_the_regular_expression_did():
    """clean_line joins str.split()'s words (twice as fast as re.sub over a corpus) where it ran
    ``re.sub(r"\\s+", " ", text).strip()``: the same text for every whitespace character of Unicode,
    alone, in runs, mixed, at the ends and between words, and for the controls it turns into spaces."""
    import re
    import unicodedata

    from fairseq_clear.preprocessing import text as text_mod
    from fairseq_clear.preprocessing.common import LineReport

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if re.fullmatch(r"\s", chr(c))]
    assert "\u00a0" in spaces and "\u3000" in spaces and "\u200b" not in spaces  # the set re means
    controls = "\x01\x1c\x1f\x85\x9f"
    words = ["a", "\u00e9t\u00e9", "\u6f22", "x\u200by", "@-@", unicodedata.lookup("SNOWMAN")]
    cases = [s for s in spaces] + [s * 3 for s in spaces] + ["".join(spaces), "".join(reversed(spaces))]
    cases += [w1 + s + w2 + s + s + w1 for s in spaces + list(controls) for w1, w2 in zip(words, words[1:])]
    cases += [s + w + controls + w + s for s, w in zip(spaces, words * len(spaces))]
    for raw in cases:
        want = re.sub(r"\s+", " ", re.sub("[\x00-\x08\x0b-\x1f\x7f-\x9f]", " ", raw)).strip()
        got = text_mod.clean_line(raw.encode("utf-8"), "text", "replace", "keep", LineReport())
        assert got == (want or None), (raw, got, want)


def test_the_splitter_is_punkt_on_the_whole_shared_corpus():
    """Every paragraph of ../shared/data/corpus's text (WikiText-103, WikiText-2 raw, wiki1m's
    untokenized sentences joined five to a paragraph), with Punkt trained on it as clear-prepare does."""
    from fairseq_clear.preprocessing import text as text_mod
    from fairseq_clear.preprocessing.common import LineReport

    corpus = shared("corpus")
    files = sorted(corpus.glob("wikitext-*/*.tokens*")) + sorted(corpus.glob("wikitext-*/*.raw"))
    lines = []
    for path in files:
        lines += [" ".join(line.split()) for line in path.read_text("utf-8").splitlines()
                  if line.strip() and not line.strip().startswith("=")]
    wiki1m = [line.strip() for path in sorted(corpus.glob("wiki1m*/*.txt"))
              for line in path.read_text("utf-8").splitlines() if line.strip()]
    lines += [" ".join(wiki1m[i:i + 5]) for i in range(0, len(wiki1m), 5)]
    assert len(lines) > 10_000
    params = _punkt_params("\n".join(lines[::40]))
    splitter = text_mod.SentenceSplitter(params)
    ours = [splitter.split(line, LineReport()) for line in lines]
    theirs = _punkt(params, lines)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not differ, (len(differ), lines[differ[0]][:300] if differ else "")


def test_punkts_training_and_spans_with_remembered_token_facts_are_nltks():
    """clear-prepare's Punkt trainer (the token facts remembered per text) learns nltk's parameters,
    trained in pieces as train_punkt feeds it; and the tokenizer's spans (whitespace search and
    realignment in place) are nltk's on hard cases and on random strings of Punkt's punctuation."""
    import random

    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

    from fairseq_clear.preprocessing import text as text_mod

    pieces = [" ".join(HARD * 2), *synthetic_sentences(400, seed=3), "\n".join(HARD)]
    plain, ours = PunktTrainer(), text_mod.punkt_trainer()
    plain.INCLUDE_ALL_COLLOCS = True
    for piece in pieces:
        plain.train(piece, finalize=False)
        ours.train(piece, finalize=False)
    plain.finalize_training()
    ours.finalize_training()
    want = text_mod.punkt_params_to_json(plain.get_params())
    assert text_mod.punkt_params_to_json(ours.get_params()) == want
    assert want["abbrev_types"] and want["ortho_context"]  # the sample taught it something

    params = _punkt_params("\n".join(HARD * 3 + synthetic_sentences(200, seed=2)))
    nltk_punkt = PunktSentenceTokenizer(text_mod.punkt_params_from_json(params))
    fast = text_mod.SentenceSplitter(params).tokenizer
    rnd = random.Random(0)
    alphabet = list("ab. ?!\"')]}( -Mr.U.S.1.5\u201c\u201d\u2019\u00ab\u00bb;:,\t") + ["Mr. ", "e.g. ", "\"(", ").\"",
                                                                              " --", "... ", "!!! ", " A "]
    texts = HARD + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 60))) for _ in range(3000)]
    differ = [t for t in texts if list(fast.span_tokenize(t)) != list(nltk_punkt.span_tokenize(t))]
    assert not differ, differ[:3]


# ---- the batched encoder --------------------------------------------------------------

def _line_by_line(encode, lines, max_body, truncate):
    """The encoder's contract, one line at a time: encode_text, then the long sentences split or cut."""
    w = encode._WORKER
    stats, events, kept = dict.fromkeys(encode.STAT_KEYS, 0), [], []
    for line in lines:
        if not line:
            events.append(None)
            continue
        stats["sentences_in"] += 1
        ids = np.asarray(encode.encode_text(line, stats, limit=max_body if truncate else None), dtype=np.int64)
        if not len(ids):
            stats["empty_after_encoding"] += 1
            events.append([])
            continue
        parts = [ids]
        if len(ids) > max_body and truncate:
            stats["long_sentences_truncated"] += 1
            stats["tokens_truncated"] += len(ids) - max_body
            parts = [ids[:max_body]]
        elif len(ids) > max_body:
            parts = encode.split_ids(ids, max_body, w["is_start"])
            stats["long_sentences_split"] += 1
            stats["extra_lines_from_splitting"] += len(parts) - 1
        stats["sentences"] += len(parts)
        stats["tokens"] += sum(map(len, parts))
        kept += parts
        events.append(parts)
    counts = np.bincount(np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64), minlength=w["n"])
    stats["unk"] = int(counts[w["unk_ids"]].sum())
    return events, counts, stats


def test_encoding_a_block_in_one_batch_is_line_by_line_encoding(spm_dir):
    """encode_lines hands the tokenizer one batch per block (the parts around <unk> markers too),
    and gives each line the ids, counts and statistics of encode_text line by line, with or without
    markers and very long lines in the block."""
    from fairseq_clear.preprocessing import encode

    plain = ["", *synthetic_sentences(30, seed=3), "   ", "", " ".join(synthetic_sentences(8, seed=4)), "\u3000 x"]
    marked = ["", "<unk>", "<unk> <unk>", "a <unk>", "<unk> b", "   ", "x" * 25_000, "word " * 5000 + "<unk> end",
              "a\u3000b <unk>\tc", "", *synthetic_sentences(50, seed=1)]
    seen = dict.fromkeys(encode.STAT_KEYS, 0)  # what the blocks exercised
    for lines in (plain, marked, plain[1:], ["", ""], ["   "]):
        block = ("\n".join(lines) + "\n").encode("utf-8")
        for mode in ("split", "truncate"):
            encode._init_worker(str(spm_dir / "sentencepiece.model"), 30, mode, "<unk>")
            batches = []
            batch = encode._WORKER["encode_batch"]
            encode._WORKER["encode_batch"] = lambda texts: batches.append(len(texts)) or batch(texts)
            events, block_ids, counts, stats = encode.encode_lines(block)
            assert len(batches) <= 1 and (lines is not marked or batches[0] >= 50), batches
            encode._WORKER["encode_batch"] = batch
            want_events, want_counts, want = _line_by_line(encode, lines, 30, mode == "truncate")
            assert [e if e is None else [block_ids.line(k).tolist() for k in e] for e in events] == \
                [e if e is None else [p.tolist() for p in e] for e in want_events]
            assert stats == want and counts.tolist() == want_counts.tolist()
            seen = {k: seen[k] + want[k] for k in seen}
    assert all(seen.values()), seen


# ---- the read-back check in constant memory ----------------------------------------------

def test_the_read_back_check_reads_blocks_without_mapping_the_files(spm_dir, tmp_path, monkeypatch):
    """check_binarized counts lines, tokens and <unk> of a split in blocks of plain reads: a mapping
    of train.bin keeps every page it read resident (a 1 GB corpus: +530 MB of peak memory)."""
    from types import SimpleNamespace

    from fairseq_clear.preprocessing import binarize, direct_binarize, encode

    model = str(spm_dir / "sentencepiece.model")
    pieces = encode.tokenizer_vocabulary(model)[1]
    unk = pieces.index("<unk>")
    rows = [[5, 6, 7], [], [unk, 9], [unk], [8] * 20]
    direct_binarize.write_rows(str(spm_dir / "dict.txt"), pieces, {"train": rows}, str(tmp_path))

    def no_mapping(*args, **kwargs):
        raise AssertionError("the read-back check mapped a file")

    monkeypatch.setattr(binarize, "np", SimpleNamespace(**{**{k: getattr(np, k) for k in dir(np)}, "memmap": no_mapping}))
    monkeypatch.setattr(binarize._blocks, "__defaults__", (3,))  # several blocks of each file
    got = binarize.check_binarized(str(tmp_path), "train", 5, 26, 2)
    assert got == {"lines": 5, "tokens": 26, "empty_lines": 1, "unk": 2}


# ---- sentencepiece's sample, drawn in parallel ------------------------------------------

def _as_sampled(line, unk):
    """What the one-pass sampler took of a line (the reference): WikiText's unk out, cut at 2000."""
    if unk and unk in line:
        line = " ".join(line.replace(unk, " ").split())
    if len(line) > 2000:
        cut = line.rfind(" ", 0, 2000)
        line = line[:cut if cut > 0 else 2000]
    return line


def _carve_by_lines(path, owner, out_dir):
    """The carve step's reference: each document as iter_documents reads it (line by line), written
    to its split's file, a blank line between two documents of a split."""
    from fairseq_clear.preprocessing.text import iter_documents

    texts, counts = {}, {}
    for i, doc in enumerate(iter_documents(str(path))):
        split = owner.get(i, "train")
        texts.setdefault(split, []).append("\n".join(doc) + "\n")
        c = counts.setdefault(split, {"documents": 0, "sentences": 0})
        c["documents"] += 1
        c["sentences"] += len(doc)
    return {s: "\n".join(t).encode("utf-8") for s, t in texts.items()}, counts


def test_carving_in_blocks_writes_what_carving_document_by_document_wrote(tmp_path, monkeypatch):
    """The carve step copies each document's bytes from blocks of the file; its splits are the
    documents a line-by-line reading gives, wherever the blocks end: inside a line's document, on the
    blank line between two, at a run of blank lines or blank lines first, and at a last line without
    its end."""
    import random

    from fairseq_clear.preprocessing import text

    rng = random.Random(3)
    docs = [[f"d{i} s{j} {'é' * rng.randint(0, 3)}{' x' * rng.randint(0, 30)}\r" * (j % 2) + f"end {i}.{j}"
             for j in range(rng.randint(1, 6))] for i in range(300)]
    well_formed = "\n\n".join("\n".join(d) for d in docs) + "\n"
    odd = "\n\n" + "\n\n\n".join("\n".join(d) for d in docs[:50]) + "\n \n" + "last line"  # runs of blanks
    picked = {}
    real_sample = random.Random.sample

    def recording(self, population, k):  # the documents carve_splits picks, for the reference
        got = real_sample(self, population, k)
        picked["chosen"] = got
        return got

    monkeypatch.setattr(random.Random, "sample", recording)
    for name, content, n_docs in (("well", well_formed, 300), ("odd", odd, 51)):
        path = tmp_path / f"{name}.sent"
        path.write_text(content, encoding="utf-8")
        for block_bytes, sizes in ((7, {"valid": 0.1, "test": 3}), (64, {"valid": 5}), (1 << 20, {"test": 0.2})):
            outs = {s: str(tmp_path / f"{name}-{block_bytes}-{s}.sent") for s in ["train"] + list(sizes)}
            counts = text.carve_splits(str(path), n_docs, sizes, 1, outs, block_bytes=block_bytes)
            chosen, owner, at = picked["chosen"], {}, 0
            for split, size in sizes.items():
                k = int(round(size * n_docs)) if size < 1 else int(size)
                owner.update(dict.fromkeys(chosen[at:at + k], split))
                at += k
            want, want_counts = _carve_by_lines(path, owner, tmp_path)
            assert counts == want_counts and counts["train"]["documents"] > 0
            for split, out in outs.items():
                assert Path(out).read_bytes() == want[split], (name, block_bytes, split)
    assert b" x\rend " in (tmp_path / "well-7-train.sent").read_bytes()  # the bytes are copied as they are


def _gc_state(item):
    import gc

    if item == "raise":
        raise ValueError(item)
    return gc.isenabled()


def test_parallel_map_runs_each_item_with_the_cycle_collector_paused_and_restores_it():
    """The workers' blocks run with Python's cycle collector off (it walked every line's list again and
    again); the collector is back on between items in this process, and after an error."""
    import gc

    from fairseq_clear.preprocessing.common import ordered_parallel_map

    assert gc.isenabled()
    for workers in (1, 2):
        states = []
        for paused in ordered_parallel_map(_gc_state, range(5), workers):
            states.append((paused, gc.isenabled()))
        assert states == [(False, True)] * 5
        with pytest.raises(ValueError, match="raise"):
            list(ordered_parallel_map(_gc_state, [1, "raise"], workers))
        assert gc.isenabled()


def test_sentencepiece_model_is_the_same_at_any_workers_and_its_threads_are_an_option(tmp_path):
    """The spm step trains the same model at --workers 1 and 2. sentencepiece's trainer splits its work
    by its thread count (the pieces' scores, hence their ids, depend on it), so that count is
    --spm-threads (sentencepiece's default, 16), not --workers; and it is in the step's fingerprint."""
    import sentencepiece as spm

    from fairseq_clear.preprocessing import encode, pipeline

    sent = tmp_path / "train.sent"
    sent.write_text("\n".join(synthetic_sentences(1500, 1)) + "\n", encoding="utf-8")

    def model(workers, **threads):
        folder = tmp_path / f"w{workers}-{threads}"  # each its own folder
        folder.mkdir()
        path = folder / "sentencepiece.model"
        stats = encode.train_sentencepiece(str(sent), str(path), 300, "unigram", 10_000, 1, 0.9999, "",
                                           workers, str(folder), **threads)
        sp = spm.SentencePieceProcessor(model_file=str(path))
        return stats.get("threads"), [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]

    one, two = model(1), model(2)
    assert one[1] == two[1]
    assert one[0] == two[0] == pipeline.DEFAULTS["spm_threads"] == 16
    # byte for byte: the model records no path of the folder it was trained in
    for name in ("sentencepiece.model", "sentencepiece.vocab"):
        assert (tmp_path / "w1-{}" / name).read_bytes() == (tmp_path / "w2-{}" / name).read_bytes(), name
    vocab = (tmp_path / "w1-{}" / "sentencepiece.vocab").read_text(encoding="utf-8").splitlines()
    assert vocab == [f"{p}\t{s:g}" for p, s in one[1]] and not list((tmp_path / "w1-{}").glob(".*"))
    assert model(2, threads=1)[1] != one[1]  # the thread count is what decides: an option, fingerprinted
    args = pipeline.add_args(__import__("argparse").ArgumentParser()).parse_args(["in.txt", "out"])
    assert args.spm_threads == 16 and "spm_threads" in pipeline.SENTENCEPIECE_OPTIONS
    for bad in (0, 1025):  # sentencepiece's trainer takes 1..1024, and would say so only after the steps before it
        with pytest.raises(pipeline.PrepareError, match=rf"^--spm-threads must be in 1\.\.1024 \(sentencepiece's "
                           rf"limit\), got {bad}$"):
            pipeline.prepare([str(sent)], str(tmp_path / "out"), spm_threads=bad)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_sentencepieces_sample_is_random_sample_of_the_candidates_whatever_the_workers_or_blocks(
        tmp_path, monkeypatch):
    """The parallel sampler's lines are exactly ``random.Random(seed).sample`` of the candidate lines
    (non-empty, not only unk markers) by their place in the file, in file order, for 1 or 3 workers
    and any block size; every candidate when they are no more than the sample; no file end needed."""
    import random

    from fairseq_clear.preprocessing import encode
    from fairseq_clear.preprocessing.text import block_spans, read_blocks

    rng = random.Random(5)
    lines = []
    for i in range(3000):
        r = rng.random()
        lines.append("" if r < 0.1 else "<unk> <unk>" if r < 0.13 else "<unk>\u00a0\x1c<unk>\u2003" if r < 0.14
                     else "<unk> é <unk>" if r < 0.15 else f"w{i} <unk> x{i}" if r < 0.25
                     else " ".join([f"long{i}"] * 400) if r < 0.27 else "\r" if r < 0.28
                     else "x" * 2500 if r < 0.29 else f"sentence {i} é")
    path = tmp_path / "s.sent"
    path.write_bytes(("\n".join(lines)).encode("utf-8"))  # the last line without its end
    cands = [t for t in (_as_sampled(line, "<unk>") for line in lines if line) if t]
    assert 2000 < len(cands) < 2800 and max(map(len, cands)) == 2000  # the long lines were cut
    assert {t[:4] for t in cands if len(t) > 1900} == {"long", "xxxx"} and "\r" in cands
    expect = [cands[i] for i in sorted(random.Random(7).sample(range(len(cands)), 500))]
    monkeypatch.setattr(encode, "SAMPLE_BLOCK_BYTES", 997)  # many blocks, lines across their ends
    spans = list(block_spans(str(path), 997))  # the blocks read_blocks reads
    assert len(spans) > 20 and [path.read_bytes()[a:b] for a, b in spans] == list(read_blocks(str(path), 997))
    for workers in (1, 3):
        assert encode.sample_lines(str(path), 500, 7, "<unk>", workers) == expect
    monkeypatch.setattr(encode, "SAMPLE_BLOCK_BYTES", 4 << 20)  # one block
    assert encode.sample_lines(str(path), 500, 7, "<unk>", 2) == expect
    assert encode.sample_lines(str(path), 500, 8, "<unk>") != expect  # the seed decides
    assert encode.sample_lines(str(path), 10 ** 6, 7, "<unk>") == cands  # all of them, in order
    no_unk = [line if len(line) <= 2000 else _as_sampled(line, "") for line in lines if line]
    assert encode.sample_lines(str(path), 10 ** 6, 7, "") == no_unk
