"""clear-mine-negatives: outputs checked before any work (an output that is an input or another
output, a directory, a missing or unwritable directory), every output written atomically, a full
disk or --work-dir reported in one line (no ``Bus error``, the temporary directory removed),
progress lines in a log, inputs that are not UTF-8 and a negative --seed refused in one line.

The command runs in-process with a stand-in for the model (vectors from a hash of each text):
what is checked here happens around the model, never inside it."""

import errno
import json
import logging
import os
import zlib

import numpy as np
import pytest

from fairseq_clear.cli import mine_negatives as cli
from fairseq_clear.mining import MiningRules, mine
from fairseq_clear.preprocessing import common


class _Loaded(Exception):
    """Raised by the stand-in for load_hub: the check came too late."""


class _Hub:
    def embed(self, texts, **kwargs):
        vectors = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=8) for t in texts]
        return np.stack(vectors).astype(np.float32)


@pytest.fixture
def no_model(monkeypatch):
    def load_hub(args):
        raise _Loaded("the model was loaded before the options were checked")

    monkeypatch.setattr(cli, "load_hub", load_hub)


@pytest.fixture
def fake_model(monkeypatch):
    monkeypatch.setattr(cli, "load_hub", lambda args: _Hub())


def _train(tmp_path, n=20):
    path = tmp_path / "train.csv"
    if not path.exists():
        rows = [f"an anchor sentence number {i},its positive number {i}" for i in range(n)]
        path.write_text("\n".join(["sent0,sent1"] + rows) + "\n", encoding="utf-8")
    return path


def _argv(tmp_path, *args):
    return ["--train", _train(tmp_path), "--checkpoint", tmp_path / "ck.pt", "--cpu", *args]


def _refused(argv, capsys):
    """The ``error:`` line of a run that must exit 2."""
    with pytest.raises(SystemExit) as info:
        cli.main([str(a) for a in argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


# ---- L10: outputs checked before the work ---------------------------------------------------

@pytest.mark.parametrize("how", ["same-string", "symlink", "hardlink"])
def test_out_equal_to_train_is_refused_before_the_model(no_model, tmp_path, capsys, how):
    train = _train(tmp_path)
    before = train.read_bytes()
    out = train
    if how == "symlink":
        out = tmp_path / "alias.csv"
        out.symlink_to(train)
    elif how == "hardlink":
        out = tmp_path / "hard.csv"
        os.link(train, out)
    err = _refused(_argv(tmp_path, "--out", out), capsys)
    assert "--out" in err and "--train" in err and "same file" in err, err
    assert train.read_bytes() == before


def test_out_equal_to_corpus_is_refused(no_model, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one text\nanother text\n", encoding="utf-8")
    err = _refused(_argv(tmp_path, "--corpus", corpus, "--out", tmp_path / "x.csv", "--plot", corpus), capsys)
    assert "--plot" in err and "--corpus" in err, err
    assert corpus.read_text(encoding="utf-8") == "one text\nanother text\n"


@pytest.mark.parametrize("options", [("--report", "out"), ("--plot", "report"), ("--report", "default-plot")])
def test_two_outputs_on_one_path_are_refused(no_model, tmp_path, capsys, options):
    option, target = options
    out = tmp_path / "mined.csv"
    paths = {"out": out, "report": tmp_path / "r.json", "default-plot": tmp_path / "mined.png"}
    argv = ["--out", out, option, paths[target]]
    if target == "report":
        argv += ["--report", paths["report"]]
    err = _refused(_argv(tmp_path, *argv), capsys)
    assert option in err and "same file" in err, err


def test_out_default_report_equal_to_out_is_refused(no_model, tmp_path, capsys):
    # --out mined.json: the report's default is OUT with .json, the same file
    err = _refused(_argv(tmp_path, "--out", tmp_path / "mined.json"), capsys)
    assert "--out" in err and "--report" in err and "same file" in err, err


@pytest.mark.parametrize("option", ["--out", "--report", "--plot"])
@pytest.mark.parametrize("case", ["directory", "missing-parent", "parent-is-a-file", "unwritable"])
def test_bad_output_paths_are_refused_before_the_model(no_model, tmp_path, capsys, option, case):
    target = {"directory": tmp_path, "missing-parent": tmp_path / "no" / "such" / "x.csv",
              "parent-is-a-file": _train(tmp_path) / "x.csv"}.get(case)
    if case == "unwritable":
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        if os.access(locked, os.W_OK):  # root writes anywhere: a directory no one can create files in
            if not os.path.isdir("/proc/self"):
                pytest.skip("needs a directory this user cannot write")
            locked = "/proc"
        target = os.path.join(locked, "x.out")
    argv = ["--out", tmp_path / "mined.csv"] if option != "--out" else []
    err = _refused(_argv(tmp_path, *argv, option, target), capsys)
    assert f"{option} " in err and str(target) in err, err


def test_work_dir_is_checked_before_the_model(no_model, tmp_path, capsys):
    err = _refused(_argv(tmp_path, "--out", tmp_path / "x.csv", "--work-dir", tmp_path / "absent"), capsys)
    assert "--work-dir" in err, err


def test_outputs_are_written_and_replace_the_previous_ones(fake_model, tmp_path, capsys):
    out = tmp_path / "mined.csv"
    for path in (out, tmp_path / "mined.json"):
        path.write_text("previous run\n", encoding="utf-8")
    assert cli.main([str(a) for a in _argv(tmp_path, "--out", out, "--num-negatives", "2")]) == 0
    report = json.loads((tmp_path / "mined.json").read_text(encoding="utf-8"))
    assert report["counts"]["rows_written"] == 40
    assert len(out.read_text(encoding="utf-8").splitlines()) == 41
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n or n.endswith(".partial")]


def test_a_killed_runs_temporary_outputs_are_removed_by_the_next_run_and_nothing_else(fake_model, tmp_path):
    dead = 999999999  # no such process: what a miner killed (SIGKILL) while writing left
    left = [f".mined.csv.tmp-{dead}", f".mined.json.tmp-{dead}"]
    others = ["mined.csv.partial", "mined.csv.tmp", ".mined.csv.tmp-notes", f".notes.csv.tmp-{dead}",
              f".mined.csv.tmp-{os.getppid()}"]  # the user's look-alikes, another target, a live process
    for name in left + others:
        (tmp_path / name).write_text("x", encoding="utf-8")
    work = tmp_path / "work"  # its vectors: a killed run's, a user's folder, a live run's
    for name in (f".clear-mine.tmp-{dead}-ab12", "clear-mine-mine", f".clear-mine.tmp-{os.getppid()}-cd34"):
        (work / name).mkdir(parents=True)
        (work / name / "corpus.npy").write_bytes(b"x")
    argv = _argv(tmp_path, "--out", tmp_path / "mined.csv", "--num-negatives", "2", "--work-dir", work)
    assert cli.main([str(a) for a in argv]) == 0
    names = set(os.listdir(tmp_path))
    assert not names & set(left), sorted(names)
    assert set(others) <= names and all((tmp_path / n).read_text(encoding="utf-8") == "x" for n in others)
    assert sorted(os.listdir(work)) == [f".clear-mine.tmp-{os.getppid()}-cd34", "clear-mine-mine"]


# ---- L10: a full disk while writing ---------------------------------------------------------

@pytest.mark.parametrize("which", ["mined.csv", "mined.json"])
def test_full_disk_while_writing_keeps_the_previous_file(fake_model, tmp_path, capsys, monkeypatch, which):
    previous = tmp_path / which
    previous.write_text("previous run\n", encoding="utf-8")
    fsync = os.fsync

    def full(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / f".{which}")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    err = _refused(_argv(tmp_path, "--out", tmp_path / "mined.csv"), capsys)
    assert str(previous) in err and "no space" in err, err
    assert previous.read_text(encoding="utf-8") == "previous run\n"
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


# ---- L11: a full --work-dir -----------------------------------------------------------------

def _pairs(n=12):
    return [(f"anchor {i}", f"positive {i}") for i in range(n)]


def _encode(texts):
    return _Hub().embed(texts)


def _no_space(*args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_work_dir_is_one_error_naming_it_and_our_temp_dir_is_removed(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr(os, "posix_fallocate", _no_space, raising=False)
    with pytest.raises(common.DiskFullError) as info:
        mine(_pairs(), _encode, MiningRules(num_negatives=2), work_dir=str(work), chunk_size=5)
    message = str(info.value)
    needed = (12 + 12) * 8 * 4  # anchors and corpus, float32 vectors of 8
    assert str(work) in message and "--work-dir" in message and f"{needed:,} bytes" in message, message
    assert os.listdir(work) == []


def test_a_file_system_without_fallocate_gets_zeros_written(tmp_path, monkeypatch):
    """posix_fallocate refused by the file system (EOPNOTSUPP): the space is claimed by writing zeros."""
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    rules = MiningRules(num_negatives=2)
    want = mine(_pairs(), _encode, rules, chunk_size=5).rows
    monkeypatch.setattr(os, "posix_fallocate", unsupported, raising=False)
    assert mine(_pairs(), _encode, rules, chunk_size=5, work_dir=str(tmp_path)).rows == want
    assert os.listdir(tmp_path) == []


def test_full_work_dir_through_the_command(fake_model, tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr(os, "posix_fallocate", _no_space, raising=False)
    err = _refused(_argv(tmp_path, "--out", tmp_path / "x.csv", "--work-dir", work), capsys)
    assert "--work-dir" in err and str(work) in err and "bytes" in err, err
    assert os.listdir(work) == [] and not (tmp_path / "x.csv").exists()


def test_mining_with_space_reserved_gives_the_same_rows(tmp_path, monkeypatch):
    rules = MiningRules(num_negatives=2)
    want = mine(_pairs(), _encode, rules, chunk_size=5).rows
    monkeypatch.delattr(os, "posix_fallocate", raising=False)  # the zero-writing path
    assert mine(_pairs(), _encode, rules, chunk_size=5, work_dir=str(tmp_path)).rows == want


# ---- L17: progress in a log -----------------------------------------------------------------

def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(common, "PROGRESS_LOG_SECONDS", 0.0)
    caplog.set_level(logging.INFO)
    mine(_pairs(12), _encode, MiningRules(num_negatives=2), chunk_size=5)
    lines = [r.getMessage() for r in caplog.records]
    for what in ("embedding anchors", "embedding corpus", "searching"):
        assert any(line.startswith(what) and "/12" in line and "/s" in line for line in lines), (what, lines)
    assert any(line.startswith("embedding anchors") and "5/12" in line for line in lines), lines


def test_progress_lines_from_the_command(fake_model, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(common, "PROGRESS_LOG_SECONDS", 0.0)
    assert cli.main([str(a) for a in _argv(tmp_path, "--out", tmp_path / "x.csv", "--chunk-size", "7")]) == 0
    err = capsys.readouterr().err
    assert "embedding anchors: 7/20" in err and "searching: " in err, err


# ---- L14: inputs that are not UTF-8, a negative seed ----------------------------------------

@pytest.mark.parametrize("option", ["--corpus", "--train"])
def test_input_not_utf8_is_one_line_naming_file_and_line(fake_model, tmp_path, capsys, option):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"sent0,sent1\nfine,also fine\ncaf\xe9,latin-1\n")
    argv = ["--train", bad] if option == "--train" else ["--train", _train(tmp_path), "--corpus", bad]
    err = _refused([*argv, "--checkpoint", tmp_path / "ck.pt", "--out", tmp_path / "x.csv"], capsys)
    assert f"{bad}:3" in err and "UTF-8" in err, err


def test_negative_seed_is_refused_before_the_model(no_model, tmp_path, capsys):
    err = _refused(_argv(tmp_path, "--out", tmp_path / "x.csv", "--sampling-strategy", "random", "--seed", "-1"),
                   capsys)
    assert "--seed" in err and "-1" in err, err
