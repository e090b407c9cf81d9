"""clear-embed and clear-eval-sts refuse unsafe outputs and bad options right after parsing,
before any model is loaded, with one ``error:`` line naming the option(s); every output is
written to a temporary file of its own and renamed over the target only when complete."""

import json
import os

import numpy as np
import pytest

from embedding_helpers import write_senteval_tree
from helpers import bin_path, run_cli

from fairseq_clear.cli import embed as embed_cli
from fairseq_clear.cli import eval_sts as eval_sts_cli


class _Loaded(Exception):
    """Raised by the stand-in for load_hub: the check came too late."""


@pytest.fixture
def no_model(monkeypatch):
    """Make loading a model an error, so that every refusal must come before it."""

    def load_hub(args):
        raise _Loaded("the model was loaded before the options were checked")

    monkeypatch.setattr(embed_cli, "load_hub", load_hub)
    monkeypatch.setattr(eval_sts_cli, "load_hub", load_hub)


def _refused(main, argv, capsys):
    """The ``error:`` line of a run that must exit 2."""
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err, err
    return err


def _embed_argv(tmp_path, *args):
    inp = tmp_path / "in.txt"
    if not inp.exists():
        inp.write_text("a cat\na dog\n", encoding="utf-8")
    return ["--checkpoint", tmp_path / "ck.pt", "--cpu", *args]


# ---- clear-embed: --output and --tsv ------------------------------------------------------

@pytest.mark.parametrize("how", ["same-string", "relative", "symlinked-dir", "hardlink"])
def test_embed_refuses_output_equal_to_tsv(no_model, tmp_path, capsys, monkeypatch, how):
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "v.npy"
    tsv = out
    if how == "relative":
        monkeypatch.chdir(tmp_path)
        tsv = os.path.join("out", "..", "out", "v.npy")
    elif how == "symlinked-dir":
        (tmp_path / "link").symlink_to(tmp_path / "out")
        tsv = tmp_path / "link" / "v.npy"
    elif how == "hardlink":
        out.write_bytes(b"old")
        tsv = tmp_path / "out" / "other.tsv"
        os.link(out, tsv)
    err = _refused(embed_cli.main, _embed_argv(tmp_path, "--input", tmp_path / "in.txt", "--output", out,
                                               "--tsv", tsv), capsys)
    assert "--output" in err and "--tsv" in err and "same file" in err, err
    assert sorted(os.listdir(tmp_path / "out")) == (["other.tsv", "v.npy"] if how == "hardlink" else [])


@pytest.mark.parametrize("option", ["--output", "--tsv"])
@pytest.mark.parametrize("how", ["same-string", "symlink"])
def test_embed_refuses_to_overwrite_its_input(no_model, tmp_path, capsys, option, how):
    inp = tmp_path / "in.txt"
    inp.write_text("a cat\na dog\n", encoding="utf-8")
    target = inp
    if how == "symlink":
        target = tmp_path / "alias.txt"
        target.symlink_to(inp)
    outputs = {"--output": tmp_path / "v.npy", option: target}
    argv = _embed_argv(tmp_path, "--input", inp, *[x for kv in outputs.items() for x in kv])
    err = _refused(embed_cli.main, argv, capsys)
    assert option in err and "--input" in err and "same file" in err, err
    assert inp.read_text(encoding="utf-8") == "a cat\na dog\n"
    assert not (tmp_path / "v.npy").exists()


def test_npy_writers_to_one_path_each_have_their_own_temporary_file(tmp_path):
    path = str(tmp_path / "v.npy")
    first, second = embed_cli.NpyRowWriter(path, 2), embed_cli.NpyRowWriter(path, 2)
    assert first.tmp != second.tmp
    first.write(np.ones((3, 2)))
    second.write(np.zeros((1, 2)))
    first.close()
    np.testing.assert_array_equal(np.load(path), np.ones((3, 2)))
    second.close()  # the last complete one wins, whole
    np.testing.assert_array_equal(np.load(path), np.zeros((1, 2)))
    assert os.listdir(tmp_path) == ["v.npy"]


def test_npy_writer_abort_leaves_the_target_alone(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, np.full((2, 2), 7, dtype=np.float32))
    writer = embed_cli.NpyRowWriter(str(path), 2)
    writer.write(np.ones((5, 2)))
    writer.abort()
    np.testing.assert_array_equal(np.load(path), np.full((2, 2), 7))
    assert os.listdir(tmp_path) == ["v.npy"]


# ---- clear-embed: numeric options ----------------------------------------------------------

@pytest.mark.parametrize("option,value", [("--batch-size", "0"), ("--batch-size", "-3"), ("--chunk-size", "0"),
                                          ("--log-interval", "-1"), ("--log-interval", "nan")])
def test_embed_refuses_bad_numbers_before_loading(no_model, tmp_path, capsys, option, value):
    argv = _embed_argv(tmp_path, "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy", option, value)
    err = _refused(embed_cli.main, argv, capsys)
    assert option in err and value in err, err


# ---- clear-embed, the real command -------------------------------------------------------

def test_embed_cli_same_output_and_tsv_is_one_error_line(ckpt, tmp_path):
    (tmp_path / "in.txt").write_text("a cat\n", encoding="utf-8")
    checkpoint, data = ckpt
    out = tmp_path / "v.npy"
    proc = run_cli([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--cpu",
                    "--input", tmp_path / "in.txt", "--output", out, "--tsv", out], check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout, proc.stdout[-2000:]
    assert "--output" in proc.stdout and "--tsv" in proc.stdout and "same file" in proc.stdout
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def test_embed_cli_writes_npy_and_tsv_into_new_directories(ckpt, hub, tmp_path):
    sentences = ["The cat sees the ball.", "", "A dog reads a story today."]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    checkpoint, data = ckpt
    out, tsv = tmp_path / "npy" / "v.npy", tmp_path / "tsv" / "deeper" / "v.tsv"
    run_cli([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--cpu",
             "--input", tmp_path / "in.txt", "--output", out, "--tsv", tsv, "--chunk-size", "2"])
    expected = hub.embed(sentences)
    np.testing.assert_allclose(np.load(out), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.loadtxt(tsv, delimiter="\t"), expected, atol=1e-4, rtol=1e-4)
    assert os.listdir(out.parent) == ["v.npy"] and os.listdir(tsv.parent) == ["v.tsv"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(out).st_mode & 0o777 == os.stat(tsv).st_mode & 0o777 == 0o666 & ~umask


# ---- clear-eval-sts: options ---------------------------------------------------------------

def _sts_argv(tmp_path, *args):
    (tmp_path / "sts").mkdir(exist_ok=True)
    checkpoint = tmp_path / "ck.pt"
    if not checkpoint.exists():
        checkpoint.write_bytes(b"not loaded")
    return ["--checkpoint", checkpoint, "--cpu", "--sts-dir", tmp_path / "sts", *args]


@pytest.mark.parametrize("value,expected", [("", "--poolings is empty"), (" , ", "--poolings is empty"),
                                            ("cls,median", "unknown pooling(s) median")])
def test_eval_sts_refuses_bad_poolings_before_loading(no_model, tmp_path, capsys, value, expected):
    err = _refused(eval_sts_cli.main, _sts_argv(tmp_path, "--poolings", value, "--output", tmp_path / "o.json"),
                   capsys)
    assert expected in err and "cls, mean" in err, err


@pytest.mark.parametrize("value,expected", [("", "--tasks is empty"), ("STS-B,STS99", "unknown task(s) STS99")])
def test_eval_sts_refuses_bad_tasks_before_loading(no_model, tmp_path, capsys, value, expected):
    err = _refused(eval_sts_cli.main, _sts_argv(tmp_path, "--tasks", value, "--output", tmp_path / "o.json"),
                   capsys)
    assert expected in err and "STS-B" in err.split("known:")[-1], err


@pytest.mark.parametrize("value", ["0", "-1"])
def test_eval_sts_refuses_bad_batch_size_before_loading(no_model, tmp_path, capsys, value):
    err = _refused(eval_sts_cli.main, _sts_argv(tmp_path, "--batch-size", value, "--output", tmp_path / "o.json"),
                   capsys)
    assert "--batch-size" in err and value in err, err


@pytest.mark.parametrize("kind", ["missing-directory", "directory", "under-a-file", "the-checkpoint"])
def test_eval_sts_refuses_bad_output_before_loading(no_model, tmp_path, capsys, kind):
    argv = _sts_argv(tmp_path)
    output, expected = {
        "missing-directory": (tmp_path / "nope" / "o.json", "does not exist"),
        "directory": (tmp_path / "sts", "is a directory"),
        "under-a-file": (tmp_path / "ck.pt" / "o.json", "is a file, not a directory"),
        "the-checkpoint": (tmp_path / "ck.pt", "same file as --checkpoint"),
    }[kind]
    err = _refused(eval_sts_cli.main, argv + ["--output", str(output)], capsys)
    assert "--output" in err and expected in err, err
    assert (tmp_path / "ck.pt").read_bytes() == b"not loaded"
    assert sorted(os.listdir(tmp_path)) == ["ck.pt", "sts"]


def test_eval_sts_refuses_a_directory_at_the_default_output(no_model, tmp_path, capsys):
    (tmp_path / "ck.sts.json").mkdir()
    err = _refused(eval_sts_cli.main, _sts_argv(tmp_path), capsys)
    assert "--output" in err and "ck.sts.json" in err and "is a directory" in err, err


# ---- clear-eval-sts: atomic JSON -------------------------------------------------------------

@pytest.mark.parametrize("default_output", [False, True])
def test_eval_sts_json_is_replaced_whole_or_not_at_all(monkeypatch, tmp_path, capsys, default_output):
    monkeypatch.setattr(eval_sts_cli, "load_hub", lambda args: object())
    monkeypatch.setattr(eval_sts_cli, "format_table", lambda report, name: "table")
    report = {"a": 1, "b": 2.5}
    monkeypatch.setattr(eval_sts_cli, "evaluate", lambda hub, args: report)
    out = tmp_path / ("ck.sts.json" if default_output else "o.json")
    out.write_text('{"old": true}\n', encoding="utf-8")
    argv = _sts_argv(tmp_path) + ([] if default_output else ["--output", str(out)])

    report["c"] = object()  # not JSON: the dump fails halfway through
    with pytest.raises(TypeError):
        eval_sts_cli.main([str(a) for a in argv])
    assert json.loads(out.read_text(encoding="utf-8")) == {"old": True}
    assert sorted(os.listdir(tmp_path)) == sorted(["ck.pt", "sts", out.name])

    del report["c"]
    eval_sts_cli.main([str(a) for a in argv])
    assert json.loads(out.read_text(encoding="utf-8")) == {"a": 1, "b": 2.5}
    assert sorted(os.listdir(tmp_path)) == sorted(["ck.pt", "sts", out.name])
    assert f"written {out}" in capsys.readouterr().out


def test_eval_sts_cli_missing_output_directory_is_refused_before_any_work(ckpt, tmp_path):
    tree = write_senteval_tree(tmp_path / "sts")
    checkpoint, data = ckpt
    out = tmp_path / "missing" / "o.json"
    proc = run_cli([bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--cpu",
                    "--sts-dir", tree, "--tasks", "STS-B", "--output", out], check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout, proc.stdout[-2000:]
    assert f"--output '{out}'" in proc.stdout and "does not exist" in proc.stdout
    assert "embedding with" not in proc.stdout  # refused before the evaluation
    assert not out.parent.exists()
