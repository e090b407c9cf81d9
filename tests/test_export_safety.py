"""clear-export-hf never deletes what it did not write (issue: it used to rmtree --out)."""

import os
import shutil

import pytest

from helpers import bin_path, run_cli

pytest.importorskip("sentence_transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _export(checkpoint, data, out, *extra, check=True):
    return run_cli([bin_path("clear-export-hf"), "--checkpoint", checkpoint, "--data", data, "--out", out, *extra],
                   check=check)


def _tree(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


def test_export_into_the_checkpoint_directory_keeps_everything(ckpt, tmp_path):
    checkpoint, data = ckpt
    run = tmp_path / "run"
    shutil.copytree(checkpoint.parent, run)
    (run / "train.log").write_text("log\n")
    shutil.copytree(data, run / "data-bin")
    before = {p: (run / p).read_bytes() for p in _tree(run)}

    proc = _export(run / checkpoint.name, run / "data-bin", run, check=False)
    assert proc.returncode == 2 and "is not empty" in proc.stdout and "--overwrite" in proc.stdout, proc.stdout[-2000:]
    assert {p: (run / p).read_bytes() for p in _tree(run)} == before

    # with --overwrite the export lands beside them and every earlier file is unchanged
    _export(run / checkpoint.name, run / "data-bin", run, "--overwrite")
    after = {p: (run / p).read_bytes() for p in _tree(run)}
    assert all(after[p] == before[p] for p in before)
    assert "modules.json" in after and "export_manifest.json" in after
    assert not [p for p in os.listdir(tmp_path) if ".partial-" in p]


def test_overwrite_replaces_only_the_previous_exports_files(ckpt, tmp_path):
    from sentence_transformers import SentenceTransformer

    checkpoint, data = ckpt
    out = tmp_path / "st"
    _export(checkpoint, data, out)
    (out / "my_notes.txt").write_text("mine")
    stale = out / "1_Pooling" / "stale.txt"  # inside a directory the export wrote: it is the export's
    stale.write_text("x")
    _export(checkpoint, data, out, "--overwrite", "--pooling", "mean")
    assert (out / "my_notes.txt").read_text() == "mine"
    assert not stale.exists()
    assert SentenceTransformer(str(out), device="cpu").encode("a dog").shape == (128,)


def test_a_foreign_file_with_an_export_name_is_never_replaced(ckpt, tmp_path):
    checkpoint, data = ckpt
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"user": 1}')
    proc = _export(checkpoint, data, out, "--overwrite", check=False)
    assert proc.returncode == 2 and "config.json" in proc.stdout and "did not write" in proc.stdout, proc.stdout[-2000:]
    assert (out / "config.json").read_text() == '{"user": 1}'
    assert os.listdir(out) == ["config.json"]
    assert not [p for p in os.listdir(tmp_path) if ".partial-" in p]


def test_a_failed_export_leaves_no_half_written_directory(ckpt, tmp_path):
    checkpoint, data = ckpt
    out = tmp_path / "st"
    # a tolerance nothing can meet: verification fails after the files were written
    proc = _export(checkpoint, data, out, "--tolerance", "-1", check=False)
    assert proc.returncode == 2 and "differs from the hub" in proc.stdout, proc.stdout[-2000:]
    assert not out.exists()
    assert os.listdir(tmp_path) == []


def test_bad_out_is_refused_before_loading(ckpt, tmp_path):
    checkpoint, data = ckpt
    afile = tmp_path / "file"
    afile.write_text("x")
    proc = _export(checkpoint, data, afile, check=False)
    assert proc.returncode == 2 and "is not a directory" in proc.stdout
    assert afile.read_text() == "x"
