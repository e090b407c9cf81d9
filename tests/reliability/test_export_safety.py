"""clear-export-hf never deletes what it did not write (issue: it used to rmtree --out)."""

import json
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
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


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
    assert stale.read_text() == "x"  # not written by an export: never deleted, even inside its folder
    # the new export's own file (its legacy flags name every mode: read the mode itself)
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "mean"
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
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_a_failed_export_leaves_no_half_written_directory(ckpt, tmp_path):
    checkpoint, data = ckpt
    out = tmp_path / "st"
    # a tolerance nothing can meet: verification fails after the files were written
    proc = _export(checkpoint, data, out, "--tolerance", "1e-30", check=False)
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


# ---- the staging and overwrite rules themselves, with a writer standing in for the export ----

def _write(staging, files):
    for rel, text in files.items():
        path = os.path.join(staging, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def test_a_manifest_we_did_not_write_cannot_make_overwrite_delete_anything(tmp_path):
    """An export_manifest.json that lists itself and the user's notes/ (the old format: a list of
    names read from the directory) made --overwrite delete notes/."""
    from fairseq_clear.export.output_dir import OutputDirError, staged_output

    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "todo.txt").write_text("mine")
    (out / "export_manifest.json").write_text(json.dumps({"entries": ["notes", "export_manifest.json"]}))
    with pytest.raises(OutputDirError, match="not an export manifest this version can trust"):
        with staged_output(out, overwrite=True) as staging:
            _write(staging, {"config.json": "{}"})
    # the new format with hashes cannot claim a name the export does not write either
    (out / "export_manifest.json").write_text(json.dumps({"format": 2, "files": {"notes/todo.txt": "0" * 64}}))
    with staged_output(out, overwrite=True) as staging:
        _write(staging, {"config.json": "{}"})
    assert (out / "notes" / "todo.txt").read_text() == "mine"
    assert sorted(os.listdir(out)) == ["config.json", "export_manifest.json", "notes"]


def test_overwrite_replaces_only_files_whose_content_we_recorded(tmp_path):
    from fairseq_clear.export.output_dir import OutputDirError, staged_output

    out = tmp_path / "out"
    with staged_output(out) as staging:
        _write(staging, {"config.json": "v1", "1_Pooling/config.json": "p1", "old.bin": "o"})
    with staged_output(out, overwrite=True) as staging:
        _write(staging, {"config.json": "v2", "1_Pooling/config.json": "p2"})
    assert (out / "config.json").read_text() == "v2" and (out / "1_Pooling" / "config.json").read_text() == "p2"
    assert (out / "old.bin").read_text() == "o"  # the previous export's, not rewritten: kept, not deleted
    (out / "config.json").write_text("edited by the user")
    with pytest.raises(OutputDirError, match="config.json"):
        with staged_output(out, overwrite=True) as staging:
            _write(staging, {"config.json": "v3"})
    assert (out / "config.json").read_text() == "edited by the user"
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_a_killed_exports_staging_directory_is_removed_by_the_next_one(tmp_path):
    import subprocess
    import sys
    import textwrap

    from fairseq_clear.export.output_dir import staged_output

    out = tmp_path / "out"
    code = textwrap.dedent(f"""
        import os, signal
        from fairseq_clear.export.output_dir import staged_output
        with staged_output({str(out)!r}) as staging:
            open(os.path.join(staging, "model.pt"), "wb").write(b"x" * 1000)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run([sys.executable, "-c", code]).returncode == -9
    left = [p for p in os.listdir(tmp_path) if ".tmp-" in p]
    assert len(left) == 1 and os.path.isfile(tmp_path / left[0] / "model.pt")
    (tmp_path / ".out.tmp-999999999-mine").mkdir()  # our pattern, a dead pid, but no marker: never removed
    with staged_output(out) as staging:
        _write(staging, {"config.json": "{}"})
    assert sorted(p for p in os.listdir(tmp_path) if ".tmp-" in p) == [".out.tmp-999999999-mine"]
    assert sorted(os.listdir(out)) == ["config.json", "export_manifest.json"]


def test_out_may_be_a_symlink_to_an_empty_directory(tmp_path):
    from fairseq_clear.export.output_dir import staged_output

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with staged_output(tmp_path / "link") as staging:
        _write(staging, {"config.json": "{}"})
    assert (tmp_path / "real" / "config.json").read_text() == "{}" and (tmp_path / "link").is_symlink()


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_an_output_folder_has_the_mode_the_umask_gives_not_mkdtemps_0700(tmp_path, umask):
    """Every output made through staged_output (exports, imports, clear-prepare's data-bin and shards,
    the pairs and multitask folders) was drwx------ (mkdtemp's mode, renamed into place): another user
    of a shared file system, the shard machines' case, could not read it."""
    from fairseq_clear.export.output_dir import current_umask, staged_output

    old = os.umask(umask)
    try:
        assert current_umask() == umask
        with staged_output(tmp_path / "out") as staging:
            _write(staging, {"config.json": "{}"})
    finally:
        os.umask(old)
    assert (os.stat(tmp_path / "out").st_mode & 0o777) == 0o777 & ~umask
