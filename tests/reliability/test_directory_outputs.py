"""The commands that write a directory (clear-prepare-pairs --out, clear-glue split OUT, clear-prepare's
OUT_DIR/data-bin) write it through the export's output directory (export/output_dir.py): a rerun
replaces only the files its manifest lists (and removes those it no longer writes), the user's files
there stay, a non-empty directory that is not their output is refused in one line and left as it
was, and a kill while publishing leaves every file whole, the previous or the new one, which the
next run finishes."""

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from change_watch import watch
from helpers import bin_path, run_captured, synthetic_sentences, write_glue

from fairseq_clear.data.binarized_checks import DictionaryFileError, load_dictionary
from fairseq_clear.export.output_dir import MANIFEST, interrupted, written_by

# ---- shared checks ------------------------------------------------------------------------------


def _tree(root) -> dict:
    """{relative path: bytes} of every file under ``root`` but our own temporary ones (``.NAME.tmp-PID``)."""
    return {os.path.relpath(os.path.join(d, f), root): Path(d, f).read_bytes()
            for d, _, names in os.walk(root) for f in names if ".tmp-" not in f}


def _staging_left(parent) -> list:
    return [p for p in os.listdir(parent) if ".tmp-" in p]


def _one_error(proc) -> str:
    """The one ``error:`` line of a run refused with status 2 and no traceback."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if "error: " in line]
    assert len(errors) == 1, proc.stderr[-2000:]
    return errors[0]


class Killed(BaseException):
    """Stands for a SIGKILL: raised at a change inside OUT and at every later one, so that nothing
    in OUT changes after it (nothing catches a BaseException on the way)."""


@contextlib.contextmanager
def _killed_after(out, after, monkeypatch):
    """Count the changes (unlink, rename, replace, rmdir) inside ``out``; raise Killed at the one
    after the first ``after``. Yields a list holding the count."""
    def stop(count):
        raise Killed(count)

    with monkeypatch.context() as m:
        yield watch(out, after, stop, m.setattr)


def _kill_while_publishing(out, restore, run, monkeypatch):
    """``restore()`` puts the previous output (with the user's files) back; ``run()`` writes the new
    one. Killed at the first, second, middle and last change inside ``out``, every file is whole
    (the previous run's or the new one's), a mix says so (interrupted: the dictionary loader refuses
    it), and a rerun finishes."""
    restore()
    before = _tree(out)
    with _killed_after(out, 10**9, monkeypatch) as calls:
        run()
    after, changes = _tree(out), calls[0]
    ours = (set(before) | set(after)) - {MANIFEST}
    assert any(before.get(rel) != after.get(rel) for rel in ours)  # the rerun changes files
    mixed = []
    for n in sorted({0, 1, changes // 2, changes - 1}):
        restore()
        with _killed_after(out, n, monkeypatch), pytest.raises(Killed):
            run()
        now = _tree(out)
        for rel in ours:  # whole: the previous run's or the new one's (or absent in one of them)
            assert now.get(rel) in (before.get(rel), after.get(rel)), (n, rel)
        if not (all(now.get(rel) == before.get(rel) for rel in ours)
                or all(now.get(rel) == after.get(rel) for rel in ours)):
            mixed.append(n)
            assert interrupted(out), n
            if os.path.isfile(os.path.join(out, "dict.txt")):  # what the tasks and commands read first
                with pytest.raises(DictionaryFileError, match="was stopped while replacing its files"):
                    load_dictionary(os.path.join(out, "dict.txt"))
        run()  # the rerun finishes
        assert _tree(out) == after, n
        assert not interrupted(out) and not _staging_left(os.path.dirname(os.path.realpath(out)))
    assert mixed  # a kill half-way through the replacement was tried


# ---- clear-prepare-pairs --out --------------------------------------------------------------------

def _pairs_file(path, n, seed, hard=True):
    s = synthetic_sentences(3 * n, seed=seed)
    rows = [f"{s[i]},{s[n + i]}" + (f",{s[2 * n + i]}" if hard else "") for i in range(n)]
    path.write_text("\n".join(["sent0,sent1" + (",hard_neg" if hard else "")] + rows) + "\n", encoding="utf-8")
    return path


def _pairs_args(tiny_data, out, train, *extra):
    return ["--train", str(train), "--data", str(tiny_data), "--out", str(out), *map(str, extra)]


def _prepare_pairs(*argv):
    from fairseq_clear.cli.prepare_pairs import build_parser
    from fairseq_clear.preprocessing.pairs import prepare

    return prepare(build_parser().parse_args(argv))


def test_prepare_pairs_rerun_replaces_its_files_and_keeps_the_users(tiny_data, tmp_path):
    out = tmp_path / "pairs"
    train = _pairs_file(tmp_path / "train.csv", 12, seed=1)
    valid = _pairs_file(tmp_path / "valid.csv", 4, seed=2)
    _prepare_pairs(*_pairs_args(tiny_data, out, train, "--valid", valid))
    assert (out / "hard_neg" / "train.bin").is_file() and (out / "sent0" / "valid.bin").is_file()
    (out / "notes.txt").write_text("mine")
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "checkpoint_last.pt").write_bytes(b"weights")
    (out / "sent0" / "mine.txt").write_text("mine too")

    # no hard negatives and no valid split now: the task must not find the previous run's
    summary = _prepare_pairs(*_pairs_args(tiny_data, out, _pairs_file(tmp_path / "t2.csv", 8, 3, hard=False)))
    assert summary["splits"]["train"]["pairs_written"] == 8
    assert not (out / "hard_neg").exists() and not list(out.glob("*/valid.*")) and not list(out.glob("raw/valid.*"))
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "checkpoints" / "checkpoint_last.pt").read_bytes() == b"weights"
    assert (out / "sent0" / "mine.txt").read_text() == "mine too"
    assert written_by(out) == "clear-prepare-pairs" and not _staging_left(tmp_path)


def test_prepare_pairs_refuses_a_directory_that_is_not_its_output(tiny_data, tmp_path):
    out = tmp_path / "theirs"
    (out / "sent0").mkdir(parents=True)
    (out / "dict.txt").write_text("the user's")
    (out / "sent0" / "train.bin").write_bytes(b"the user's")
    train = _pairs_file(tmp_path / "train.csv", 12, seed=1)
    message = _one_error(run_captured([bin_path("clear-prepare-pairs"), *_pairs_args(tiny_data, out, train)]))
    assert str(out) in message and "not empty" in message and MANIFEST in message, message
    assert _tree(out) == {"dict.txt": b"the user's", "sent0/train.bin": b"the user's"}
    assert not _staging_left(tmp_path)


def test_prepare_pairs_out_with_a_trailing_slash_or_through_a_symlink(tiny_data, tmp_path):
    out = tmp_path / "pairs"
    train = _pairs_file(tmp_path / "train.csv", 12, seed=1)
    for _ in range(2):  # new, then a rerun into it
        _prepare_pairs(*_pairs_args(tiny_data, f"{out}/", train))
        assert written_by(out) == "clear-prepare-pairs" and (out / "sent1" / "train.bin").is_file()
    link = tmp_path / "link"
    link.symlink_to(out)
    _prepare_pairs(*_pairs_args(tiny_data, link, _pairs_file(tmp_path / "t2.csv", 5, seed=2)))
    assert link.is_symlink() and (out / "raw" / "train.sent0").read_text().count("\n") == 5
    assert not _staging_left(tmp_path)


def test_prepare_pairs_killed_while_publishing_leaves_whole_files(tiny_data, tmp_path, monkeypatch):
    out, snapshot = tmp_path / "pairs", tmp_path / "snapshot"
    _prepare_pairs(*_pairs_args(tiny_data, snapshot, _pairs_file(tmp_path / "t1.csv", 12, seed=1)))
    (snapshot / "notes.txt").write_text("mine")
    new = _pairs_file(tmp_path / "t2.csv", 9, seed=2, hard=False)

    def restore():
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(snapshot, out)

    _kill_while_publishing(out, restore, lambda: _prepare_pairs(*_pairs_args(tiny_data, out, new)), monkeypatch)
    assert (out / "notes.txt").read_text() == "mine" and not (out / "hard_neg").exists()


# ---- clear-glue split OUT -------------------------------------------------------------------------

@pytest.fixture
def glue_dir(tmp_path):
    return write_glue(tmp_path / "glue", rows_per_split=12)


def test_glue_split_rerun_replaces_its_files_and_keeps_the_users(tiny_data, glue_dir, tmp_path):
    from fairseq_clear.evaluation.glue.finetune import split_task

    out = tmp_path / "MRPC-raw"
    spm = str(tiny_data / "sentencepiece.model")
    assert split_task(str(glue_dir), "MRPC", spm, str(out))["test"] == 12
    (out / "notes.txt").write_text("mine")
    (glue_dir / "MRPC" / "test.tsv").unlink()  # no test split now: its previous files must go
    lines = (glue_dir / "MRPC" / "train.tsv").read_text(encoding="utf-8").splitlines()
    (glue_dir / "MRPC" / "train.tsv").write_text("\n".join(lines[:6]) + "\n", encoding="utf-8")
    assert split_task(str(glue_dir), "MRPC", spm, str(out)) == {"train": 5, "dev": 12}
    assert (out / "train.label").read_text().count("\n") == 5
    assert not list(out.glob("test.*")) and (out / "notes.txt").read_text() == "mine"
    assert written_by(out) == "clear-glue split" and not _staging_left(tmp_path)


def test_glue_split_refuses_a_directory_that_is_not_its_output(tiny_data, glue_dir, tmp_path):
    out = tmp_path / "theirs"
    out.mkdir()
    (out / "train.input0").write_text("the user's")
    proc = run_captured([bin_path("clear-glue"), "split", glue_dir, "MRPC", tiny_data / "sentencepiece.model", out])
    message = _one_error(proc)
    assert str(out) in message and "OUT" in message and "not empty" in message, message
    assert _tree(out) == {"train.input0": b"the user's"} and not _staging_left(tmp_path)


def test_glue_split_out_with_a_trailing_slash_or_through_a_symlink(tiny_data, glue_dir, tmp_path):
    from fairseq_clear.evaluation.glue.finetune import split_task

    out, spm = tmp_path / "CoLA-raw", str(tiny_data / "sentencepiece.model")
    for _ in range(2):
        split_task(str(glue_dir), "CoLA", spm, f"{out}/")
        assert written_by(out) == "clear-glue split" and (out / "dev.input0").is_file()
    link = tmp_path / "link"
    link.symlink_to(out)
    split_task(str(glue_dir), "STS-B", spm, str(link))  # another task into the same (our) directory
    assert link.is_symlink() and (out / "train.input1").is_file()
    assert "." in (out / "train.label").read_text().splitlines()[0]  # STS-B's score / 5, not CoLA's class
    assert not _staging_left(tmp_path)


def test_glue_split_killed_while_publishing_leaves_whole_files(tiny_data, glue_dir, tmp_path, monkeypatch):
    from fairseq_clear.evaluation.glue.finetune import split_task

    out, snapshot, spm = tmp_path / "raw", tmp_path / "snapshot", str(tiny_data / "sentencepiece.model")
    split_task(str(glue_dir), "MRPC", spm, str(snapshot))
    (snapshot / "notes.txt").write_text("mine")
    other = write_glue(tmp_path / "glue2", rows_per_split=7, seed=1)
    (other / "MRPC" / "test.tsv").unlink()

    def restore():
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(snapshot, out)

    _kill_while_publishing(out, restore, lambda: split_task(str(other), "MRPC", spm, str(out)), monkeypatch)
    assert (out / "notes.txt").read_text() == "mine" and not list(out.glob("test.*"))


# ---- clear-prepare OUT_DIR/data-bin ----------------------------------------------------------------

FAST = dict(vocab_size=120, spm_sample_size=5000, input_format="lines", documents="lines", valid_size=20,
            test_size=20, workers=1, progress=False)


@pytest.fixture
def raw(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(synthetic_sentences(400, seed=7)) + "\n", encoding="utf-8")
    return path


def test_prepare_rerun_replaces_data_bin_files_and_keeps_the_users(raw, tmp_path):
    from fairseq_clear.preprocessing.pipeline import prepare

    out = tmp_path / "prepared"
    prepare([str(raw)], str(out), **FAST)
    data_bin = out / "data-bin"
    (data_bin / "checkpoint_best.pt").write_bytes(b"weights")
    (data_bin / "runs").mkdir()
    (data_bin / "runs" / "log.json").write_text("mine")
    summary = prepare([str(raw)], str(out), **dict(FAST, tokens_per_sample=12, test_size=0))
    assert summary["steps"]["binarize"]["status"] == "ran" and "test" not in summary["splits"]
    assert (data_bin / "checkpoint_best.pt").read_bytes() == b"weights"
    assert (data_bin / "runs" / "log.json").read_text() == "mine"
    assert not list(data_bin.glob("test.*"))  # the previous run's split, which fairseq would read
    assert written_by(data_bin) == "clear-prepare" and not _staging_left(out)


def test_prepare_refuses_a_data_bin_that_is_not_its_output(raw, tmp_path):
    """Not even one with a tokenizer record (what the earlier check trusted): a copied data-bin."""
    out = tmp_path / "prepared"
    (out / "data-bin").mkdir(parents=True)
    (out / "data-bin" / "clear_tokenizer.json").write_text("{}")
    (out / "data-bin" / "checkpoint_best.pt").write_bytes(b"weights")
    proc = run_captured([bin_path("clear-prepare"), raw, out, "--input-format", "lines", "--documents", "lines",
                         "--valid-size", "20", "--test-size", "20", "--vocab-size", "120", "--no-progress"])
    message = _one_error(proc)
    assert str(out / "data-bin") in message and "not written by clear-prepare" in message, message
    assert _tree(out / "data-bin") == {"clear_tokenizer.json": b"{}", "checkpoint_best.pt": b"weights"}
    assert not _staging_left(out)


def test_prepare_out_dir_with_a_trailing_slash_and_data_bin_through_a_symlink(raw, tmp_path):
    from fairseq_clear.preprocessing.pipeline import prepare

    out, elsewhere = tmp_path / "prepared", tmp_path / "fast-disk" / "data-bin"
    elsewhere.mkdir(parents=True)
    out.mkdir()
    (out / "data-bin").symlink_to(elsewhere)  # data-bin kept on another disk
    for options in (FAST, dict(FAST, tokens_per_sample=12)):
        prepare([str(raw)], f"{out}/", **options)
        assert (out / "data-bin").is_symlink() and (elsewhere / "train.bin").is_file()
        assert written_by(elsewhere) == "clear-prepare"
    assert not _staging_left(out) and not _staging_left(elsewhere.parent)


def test_prepare_killed_while_publishing_data_bin_leaves_whole_files(raw, tmp_path, monkeypatch):
    from fairseq_clear.preprocessing.pipeline import prepare

    out, snapshot = tmp_path / "prepared", tmp_path / "snapshot"
    prepare([str(raw)], str(out), **FAST)
    (out / "data-bin" / "checkpoint_best.pt").write_bytes(b"weights")
    shutil.copytree(out, snapshot)  # the step markers name files under OUT_DIR: restored in the same place

    def restore():
        shutil.rmtree(out)
        shutil.copytree(snapshot, out)

    new = dict(FAST, tokens_per_sample=12, test_size=0)
    _kill_while_publishing(out / "data-bin", restore, lambda: prepare([str(raw)], str(out), **new), monkeypatch)
    assert (out / "data-bin" / "checkpoint_best.pt").read_bytes() == b"weights"


def test_prepare_pairs_counts_the_hard_negatives_it_does_not_write(tiny_data, tmp_path, caplog):
    """SimCSE's csv with a hard_neg column, prepared without its column (--no-hard-negatives, or
    --negative-pairs, whose rows are sent0,sent1 with a label): the left-out column is counted in
    pairs.json and named in a warning, not dropped without a word."""
    train = _pairs_file(tmp_path / "train.csv", 12, seed=1)
    caplog.set_level("WARNING")
    summary = _prepare_pairs(*_pairs_args(tiny_data, tmp_path / "plain", train, "--no-hard-negatives"))
    assert summary["splits"]["train"]["hard_negatives_not_written"] == 12
    assert "the hard_neg of 12 rows is not written (--no-hard-negatives" in caplog.text
    assert not (tmp_path / "plain" / "hard_neg").exists()
    labelled = _prepare_pairs(*_pairs_args(tiny_data, tmp_path / "labelled", train, "--negative-pairs"))
    assert labelled["splits"]["train"]["hard_negatives_not_written"] == 12
    assert "(--negative-pairs: the rows are sent0,sent1 only)" in caplog.text
    used = _prepare_pairs(*_pairs_args(tiny_data, tmp_path / "used", train))
    assert "hard_negatives_not_written" not in used["splits"]["train"]
