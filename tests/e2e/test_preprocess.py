"""preprocess/: raw text → data-bin for --task clear, resumable, with an honest summary."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import EXCLUSIVE, REPO, bin_path, run_cli, synthetic_sentences

from fairseq_clear.preprocessing.common import PrepareError, StepMarkers
from fairseq_clear.preprocessing.pipeline import prepare

PREPARE_SH = REPO / "preprocess" / "prepare.sh"
# binarizer="fairseq": these tests read the text of pieces (work/*.spm) that this path writes; the
# default direct binarizer writes the same data-bin (tests/reliability/test_direct_binarize.py)
FAST = dict(vocab_size=120, punkt_sample_chars=60_000, spm_sample_size=5000, progress=False,
            binarizer="fairseq")


def synthetic_corpus(path: Path, n_sentences: int, seed: int):
    """Documents of 1–3 paragraphs (one per line) of 1–5 sentences; blank line between documents.

    Returns the list of documents, each a list of sentences."""
    rng = random.Random(seed)
    sents = synthetic_sentences(n_sentences, seed=seed)
    docs, lines, i = [], [], 0
    while i < len(sents):
        doc, paragraphs = [], []
        for _ in range(rng.randint(1, 3)):
            k = rng.randint(1, 5)
            part = sents[i:i + k]
            if not part:
                break
            paragraphs.append(" ".join(part))
            doc.extend(part)
            i += k
        docs.append(doc)
        lines.append("\n".join(paragraphs))
    path.write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("raw")
    train = synthetic_corpus(d / "train.txt", 2400, seed=3)
    valid = synthetic_corpus(d / "valid.txt", 150, seed=4)
    return d, train, valid


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    """One pipeline run with carved valid/test splits, in this process."""
    d, train, _ = corpus
    out = tmp_path_factory.mktemp("prepared")
    summary = prepare([str(d / "train.txt")], str(out), valid_size=20, test_size=0.05,
                      workers=2, **FAST)
    return out, summary, train


def read_split(data_bin, split):
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(data_bin / "dict.txt"))
    ds = data_utils.load_indexed_dataset(str(data_bin / split), d)
    return d, [ds[i].numpy() for i in range(len(ds))]


@pytest.mark.parametrize("workers", [1, 2])
def test_binarize_writes_what_the_fairseq_preprocess_command_writes(prepared, tmp_path, workers):
    """binarize() (fairseq's binarizer in this process) and the console script on the same pieces:
    the same files, byte for byte, for three splits, with lines fairseq's tokenizer treats specially
    (an empty line, a piece not in dict.txt, tabs, an ideographic space, a carriage return)."""
    from fairseq_clear.preprocessing.binarize import binarize

    out, _, _ = prepared
    dict_path = out / "data-bin" / "dict.txt"
    odd = tmp_path / "odd.spm"
    odd.write_text("\u2581the \u2581cat\n\n\u2581no_such_piece \u2581a\n  \u2581a\t\u2581b  \n"
                   "\u2581a\u3000\u2581b\n\u2581a\r\u2581b\n", encoding="utf-8")
    prefixes = {"train": out / "work" / "train.spm", "valid": odd, "test": out / "work" / "test.spm"}
    assert all(p.stat().st_size > 0 for p in prefixes.values())
    log = binarize(str(dict_path), {k: str(v) for k, v in prefixes.items()}, str(tmp_path / "ours"), workers,
                   log_path=str(tmp_path / "ours.log"))
    assert "(by <unk>)" in log and (tmp_path / "ours.log").read_text().endswith(log)
    run_cli([bin_path("fairseq-preprocess"), "--only-source", "--srcdict", dict_path, "--destdir", tmp_path / "ref",
             "--workers", workers, "--dataset-impl", "mmap", "--trainpref", prefixes["train"],
             "--validpref", prefixes["valid"], "--testpref", prefixes["test"]])
    ours = sorted(p.name for p in (tmp_path / "ours").iterdir())
    assert ours == sorted(p.name for p in (tmp_path / "ref").iterdir() if p.name != "preprocess.log")
    assert ours == ["dict.txt"] + [f"{s}.{e}" for s in ("test", "train", "valid") for e in ("bin", "idx")]
    for name in ours:
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    _, valid = read_split(tmp_path / "ours", "valid")
    assert [len(v) for v in valid] == [3, 1, 3, 3, 3, 2, 2]  # fairseq splits at any space; "\r" ends a line


def test_data_bin_follows_the_contract(prepared):
    import sentencepiece as spm

    out, summary, _ = prepared
    data_bin = out / "data-bin"
    for name in ("dict.txt", "sentencepiece.model", "train.bin", "train.idx", "valid.bin",
                 "valid.idx", "test.bin", "test.idx"):
        assert (data_bin / name).is_file(), name
    sp = spm.SentencePieceProcessor(model_file=str(data_bin / "sentencepiece.model"))
    entries = [line.split(" ") for line in (data_bin / "dict.txt").read_text("utf-8").splitlines()]
    assert [e[0] for e in entries[-2:]] == ["<mask>", "[DEL]"]
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))]
    assert [e[0] for e in entries[:-2]] == pieces  # sentencepiece id order, specials left out

    from fairseq.data import Dictionary

    d = Dictionary.load(str(data_bin / "dict.txt"))
    for piece in pieces:
        assert d.index(piece) == sp.piece_to_id(piece) + 1  # XLM-R convention
    # counts are the training frequencies and add up to the training tokens (no <unk> here)
    assert sum(int(e[1]) for e in entries) == summary["splits"]["train"]["tokens"]
    assert summary["splits"]["train"]["unk_tokens"] == 0
    assert (out / "summary.json").is_file()
    assert json.loads((out / "summary.json").read_text())["splits"] == summary["splits"]
    # intermediate files are outside data-bin
    assert not list(data_bin.glob("*.spm")) and (out / "work" / "train.spm").is_file()


def test_sentences_and_documents_survive(prepared):
    out, summary, docs = prepared
    s = summary["splits"]
    # Punkt (trained on the corpus here: no pretrained model offline) found every sentence
    assert summary["sentence_splitter"]["model"].startswith("trained unsupervised")
    assert sum(v["sentences"] for v in s.values()) == sum(len(doc) for doc in docs)
    assert sum(v["documents"] for v in s.values()) == len(docs)
    assert s["valid"]["documents"] == 20
    assert s["test"]["documents"] == round(0.05 * len(docs))
    # every document boundary is one empty line (a lone </s>) in the binarized split
    _, items = read_split(out / "data-bin", "train")
    empty = [i for i, t in enumerate(items) if len(t) == 1]
    assert len(empty) == s["train"]["documents"] - 1
    assert len(items) == s["train"]["sentences"] + len(empty)
    assert len(items[0]) > 1 and len(items[-1]) > 1
    assert all(b - a > 1 for a, b in zip(empty, empty[1:]))  # never two in a row


def test_fairseq_sentencepiece_bpe_decodes_the_binarized_text(prepared):
    """The dictionary and the model agree: fairseq's --bpe sentencepiece gets the text back."""
    from fairseq.data.encoders.sentencepiece_bpe import SentencepieceBPE, SentencepieceConfig

    out, _, docs = prepared
    data_bin = out / "data-bin"
    bpe = SentencepieceBPE(SentencepieceConfig(sentencepiece_model=str(data_bin / "sentencepiece.model")))
    d, items = read_split(data_bin, "valid")
    decoded = [bpe.decode(d.string(t[:-1])) for t in items if len(t) > 1]
    all_sentences = {s for doc in docs for s in doc}
    assert decoded and all(s in all_sentences for s in decoded)
    # and encoding with fairseq's bpe + dictionary gives the binarized ids
    first = decoded[0]
    ids = d.encode_line(bpe.encode(first), add_if_not_exist=False, append_eos=True).numpy()
    assert ids.tolist() == [t for t in items if len(t) > 1][0].tolist()


def test_fairseq_train_runs_on_the_output(prepared, tmp_path):
    from helpers import train_args

    out, _, _ = prepared
    proc = run_cli(train_args(out / "data-bin", tmp_path / "ckpt", max_update=4, batch_size=8))
    assert "num_updates" in proc.stdout and (tmp_path / "ckpt" / "checkpoint_last.pt").is_file()


def test_truncated_output_is_not_taken_for_finished(prepared, corpus):
    """Outputs that changed after their marker was written (a torn copy, a disk error) are
    made again, and only they."""
    d, _, _ = corpus
    out, first, _ = prepared
    options = dict(valid_size=20, test_size=0.05, workers=1, **FAST)
    prepare([str(d / "train.txt")], str(out), **options)  # the fixture's state (a no-op in order)
    spm_file = out / "work" / "valid.spm"
    bin_file = out / "data-bin" / "valid.bin"
    whole, whole_bin = spm_file.read_bytes(), bin_file.read_bytes()
    spm_file.write_bytes(whole[:100])
    bin_file.write_bytes(whole_bin[:100])
    again = prepare([str(d / "train.txt")], str(out), **options)
    ran = {n for n, st in again["steps"].items() if st["status"] == "ran"}
    assert ran == {"encode-valid", "binarize"}
    assert spm_file.read_bytes() == whole and bin_file.read_bytes() == whole_bin


def test_rerun_skips_every_step_and_changed_options_rerun_downstream(prepared, corpus):
    d, _, _ = corpus
    out, first, _ = prepared
    bin_mtime = (out / "data-bin" / "train.bin").stat().st_mtime_ns
    again = prepare([str(d / "train.txt")], str(out), valid_size=20, test_size=0.05, workers=1, **FAST)
    assert all(st["status"] != "ran" for st in again["steps"].values()), again["steps"]
    assert again["splits"] == first["splits"]  # the worker count does not change the output
    assert (out / "data-bin" / "train.bin").stat().st_mtime_ns == bin_mtime

    # a different --tokens-per-sample changes encoding onwards, not splitting or sentencepiece
    changed = prepare([str(d / "train.txt")], str(out), valid_size=20, test_size=0.05, workers=2,
                      tokens_per_sample=12, **FAST)
    ran = {n for n, st in changed["steps"].items() if st["status"] == "ran"}
    assert ran == {"encode-train", "encode-valid", "encode-test", "dict", "binarize"}
    assert changed["splits"]["train"]["long_sentences_split"] > 0
    assert changed["splits"]["train"]["sentences"] > first["splits"]["train"]["sentences"]


@EXCLUSIVE
def test_killed_run_resumes_and_matches_an_uninterrupted_run(corpus, prepared, tmp_path):
    """SIGKILL in the middle of encoding; the same command then finishes, skipping finished steps."""
    d, _, _ = corpus
    big = tmp_path / "big.txt"
    synthetic_corpus(big, 12_000, seed=5)
    out = tmp_path / "out"
    args = [PREPARE_SH, big, out, "--valid", d / "valid.txt", "--test-size", "0",
            "--vocab-size", "120", "--punkt-sample-chars", "60000", "--spm-sample-size", "5000",
            "--workers", "1", "--binarizer", "fairseq"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable)
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.time() + 120
    work = out / "work"
    try:
        while time.time() < deadline and proc.poll() is None:
            if work.is_dir() and any(p.name.startswith(".train.spm.tmp-") for p in work.iterdir()):
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before encoding could be interrupted"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert not (work / "train.spm").exists()
    assert not StepMarkers(str(work / "steps"), str(work.parent)).load("encode-train")
    assert any(p.name.startswith(".train.spm.tmp-") for p in work.iterdir())  # the torn file

    done = run_cli(args + ["--no-progress"], env={"OMP_NUM_THREADS": "1", "PYTHON": sys.executable})
    summary = json.loads((out / "summary.json").read_text())
    status = {n: st["status"] for n, st in summary["steps"].items()}
    assert status["sentences-train"] != "ran" and status["spm"] != "ran", status
    assert status["encode-train"] == "ran" and status["binarize"] == "ran"
    assert not any(".tmp-" in p.name for p in work.iterdir())  # the stale temp file was removed
    assert "steps run:" in done.stdout

    # the resumed encoding is the one an uninterrupted run makes (and the pipeline has
    # checked data-bin against it: lines, tokens and <unk> read back from train.bin)
    from fairseq_clear.preprocessing.encode import encode_file

    encode_file(str(work / "train.inputs.sent"), str(tmp_path / "ref.spm"),
                str(work / "sentencepiece.model"), 510, "split", "", 2, False)
    assert (work / "train.spm").read_bytes() == (tmp_path / "ref.spm").read_bytes()
    assert summary["binarized"]["train"]["lines"] == summary["splits"]["train"]["sentences"] + \
        summary["splits"]["train"]["documents"] - 1


def test_missing_input_fails_at_once_naming_it(tmp_path):
    out = tmp_path / "out"
    proc = run_cli([PREPARE_SH, tmp_path / "no-such.txt", out], check=False,
                   env={"PYTHON": sys.executable})
    assert proc.returncode == 2
    assert "no-such.txt" in proc.stdout and "does not exist" in proc.stdout
    assert not out.exists()  # nothing was started
    with pytest.raises(PrepareError, match="--valid: input '.*missing-valid.txt' does not exist"):
        (tmp_path / "t.txt").write_text("A sentence.\n")
        prepare([str(tmp_path / "t.txt")], str(out), valid=[str(tmp_path / "missing-valid.txt")])


def test_unwritable_output_fails_at_once_naming_it(tmp_path):
    raw = tmp_path / "t.txt"
    raw.write_text("A sentence.\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_cli([bin_path("clear-prepare"), raw, blocker / "out"], check=False)
    assert proc.returncode == 2 and str(blocker / "out") in proc.stdout, proc.stdout
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(PrepareError, match="not writable"):
            prepare([str(raw)], str(locked))


def test_never_deletes_a_data_bin_or_temporary_look_alike_it_did_not_write(tmp_path):
    """OUT_DIR may be the user's directory: a data-bin without our tokenizer record, and a
    '.x.tmp-<dead pid>' entry that is not one of our names, are left alone."""
    raw = tmp_path / "t.txt"
    raw.write_text("A sentence.\n")
    out = tmp_path / "out"
    (out / "data-bin").mkdir(parents=True)
    (out / "data-bin" / "mine.txt").write_text("the user's")
    theirs = out / ".notes.tmp-999999999"
    theirs.write_text("the user's")
    with pytest.raises(PrepareError, match=r"data-bin' exists and was not written by clear-prepare"):
        prepare([str(raw)], str(out))
    assert (out / "data-bin" / "mine.txt").read_text() == "the user's"
    assert theirs.read_text() == "the user's"
    ours = out / ".data-bin.tmp-999999999"  # a crashed run's own leftover goes
    ours.mkdir()
    (out / "data-bin" / "mine.txt").unlink()
    (out / "data-bin").rmdir()
    (out / "data-bin").write_text("a file")
    with pytest.raises(PrepareError, match="not written by clear-prepare"):
        prepare([str(raw)], str(out))
    assert not ours.exists() and theirs.exists()


def test_inputs_without_any_sentence_fail_naming_them(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.txt").write_bytes(b"\n \n\t\n")
    with pytest.raises(PrepareError, match="no sentences in the train inputs.*empty.txt.*blank.txt"):
        prepare([str(tmp_path / "empty.txt"), str(tmp_path / "blank.txt")], str(tmp_path / "out"),
                workers=1, **FAST)


def test_corpus_too_small_to_carve_says_what_to_do(tmp_path):
    raw = tmp_path / "one-doc.txt"
    raw.write_text("One sentence here. Another one there.\n")
    with pytest.raises(PrepareError, match="cannot carve.*--valid"):
        prepare([str(raw)], str(tmp_path / "out"), workers=1, **FAST)


def test_lines_format_with_line_documents_and_bpe(tmp_path):
    """--input-format lines (e.g. wiki1m): no sentence splitting, every line its own document."""
    raw = tmp_path / "wiki1m.txt"
    sents = synthetic_sentences(400, seed=9)
    raw.write_text("\n".join(sents) + "\n")
    s = prepare([str(raw)], str(tmp_path / "out"), input_format="lines", documents="lines",
                model_type="bpe", valid_size=10, test_size=0, workers=1, remove_intermediate=True,
                **FAST)
    assert s["sentence_splitter"]["model"].startswith("none")
    assert s["splits"]["train"]["sentences"] + s["splits"]["valid"]["sentences"] == 400
    assert s["splits"]["train"]["documents"] == 390 and "test" not in s["splits"]
    assert s["sentencepiece"]["model_type"] == "bpe"
    assert "punkt" not in s["steps"]
    # --remove-intermediate: the text files are gone; the same command is still a no-op
    work = tmp_path / "out" / "work"
    assert not list(work.glob("*.sent")) and not list(work.glob("*.spm"))
    again = prepare([str(raw)], str(tmp_path / "out"), input_format="lines", documents="lines",
                    model_type="bpe", valid_size=10, test_size=0, workers=2, **FAST)
    assert all(st["status"] != "ran" for st in again["steps"].values())
    assert again["splits"] == s["splits"]
    assert (tmp_path / "out" / "data-bin" / "train.bin").is_file()


def test_chunked_rendering_equals_one_pass():
    """Worker-side rendering of chunks + merging in order == rendering the whole stream."""
    from fairseq_clear.preprocessing.documents import BREAK, START, DocumentMerger, render

    class Buf:
        def __init__(self):
            self.parts = []

        def write(self, s):
            self.parts.append(s)

    rng = random.Random(0)
    for _ in range(300):
        events = []
        for i in range(rng.randint(0, 40)):
            r = rng.random()
            events.append(BREAK if r < 0.3 else START if r < 0.4 else
                          [f"s{i}.{k}" for k in range(rng.choice([0, 0, 1, 2, 3]))])
        results = []
        for cuts in ([], sorted(rng.sample(range(len(events) + 1), min(len(events), 4)))):
            buf = Buf()
            merger = DocumentMerger(buf)
            bounds = [0] + cuts + [len(events)]
            for a, b in zip(bounds[:-1], bounds[1:]):
                merger.add(render(events[a:b]))
            merger.finish()
            results.append(("".join(buf.parts), merger.documents, merger.empty_documents,
                            merger.sentences))
        # the plain definition: documents are the runs between breaks that began (content or
        # START); those with sentences are written, a blank line between them
        written, empty, current = [], 0, None
        for ev in events + [BREAK]:
            if ev is BREAK:
                if current is not None:
                    if current:
                        written.append(current)
                    else:
                        empty += 1
                current = None
            else:
                current = (current or []) + ([] if ev is START else ev)
        text = "\n\n".join("\n".join(doc) for doc in written) + ("\n" if written else "")
        expected = (text, len(written), empty, sum(map(len, written)))
        assert results[0] == expected and results[1] == expected, (events, results)
