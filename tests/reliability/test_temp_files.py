"""One temporary name for what the package writes (``.NAME.tmp-PID``, ``atomic_files``) and the
cleanups that know it: what a killed writer of ours left is removed by the next run, and nothing
else is (the miner's case: tests/reliability/test_miner_outputs.py)."""

import os

import numpy as np
import torch

from fairseq_clear.atomic_files import TEMP_NAME, atomic_write

DEAD = 999999999  # no such process


def test_every_writer_renames_from_the_one_temporary_name(tmp_path, monkeypatch):
    from fairseq_clear.cli.embed import NpyRowWriter
    from fairseq_clear.export.output_dir import staged_output
    from fairseq_clear.fairseq_fixes.atomic_checkpoint_copy import atomic_copy
    from fairseq_clear.fairseq_fixes.durable_save import durable_save

    renames = []
    for name in ("replace", "rename"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda src, dst, real=real: (renames.append((src, dst)), real(src, dst))[1])
    with atomic_write(str(tmp_path / "a.txt")) as f:
        f.write("a")
    writer = NpyRowWriter(str(tmp_path / "v.npy"), 2)
    writer.write(np.ones((1, 2)))
    writer.close()
    durable_save({"w": torch.ones(2)}, str(tmp_path / "checkpoint_last.pt"))
    atomic_copy(str(tmp_path / "checkpoint_last.pt"), str(tmp_path / "checkpoint_best.pt"))
    with staged_output(tmp_path / "out") as staging:
        open(os.path.join(staging, "x"), "w").close()
    assert sorted(os.path.basename(dst) for _, dst in renames) == [
        "a.txt", "checkpoint_best.pt", "checkpoint_last.pt", "export_manifest.json", "out", "v.npy"]
    for src, dst in renames:
        m = TEMP_NAME.match(os.path.basename(src))
        assert m and m.group("target") == os.path.basename(dst) and int(m.group("pid")) == os.getpid(), (src, dst)
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "checkpoint_best.pt", "checkpoint_last.pt", "out", "v.npy"]


def test_the_save_dir_cleanup_removes_every_dead_writer_of_ours_and_nothing_else(tmp_path):
    from fairseq_clear.fairseq_fixes.save_dir_lock import remove_stale_temp_files

    ours = [f".checkpoint_last.pt.tmp-{DEAD}-copy", f".checkpoint_3_9.pt.tmp-{DEAD}-save1",
            f".train.log.json.tmp-{DEAD}", f".spm.tmp-{DEAD}.model"]
    theirs = ["checkpoint_last.pt.tmp", "notes.tmp-copy-x", f"checkpoint_last.pt.tmp-{DEAD}",
              ".notes.tmp-x", f".notes.tmp-{2 ** 40}", f".checkpoint_last.pt.tmp-{os.getppid()}-copy"]
    # fairseq's, a user's (no pid, or one no process can have), a live process's
    for name in ours + theirs:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / f".export.tmp-{DEAD}-ab12").mkdir()  # a killed writer's directory
    (tmp_path / f".export.tmp-{DEAD}-ab12" / "model.pt").write_bytes(b"x")
    removed = remove_stale_temp_files(tmp_path)
    assert sorted(removed) == sorted(ours + [f".export.tmp-{DEAD}-ab12"])
    assert sorted(os.listdir(tmp_path)) == sorted(theirs)


def test_another_machines_temporary_files_are_never_judged_by_this_machines_processes(tmp_path):
    """A folder several machines share (clear-prepare's shards on a network file system): a temporary
    name holds its machine (``.NAME.tmp-PID@HOST``); another machine's is left alone whatever its pid
    (its process cannot be seen from here: removing it broke that machine's rename), this machine's
    dead writer's is removed, and a name without a machine (earlier versions) is judged here."""
    from fairseq_clear.atomic_files import HOST, remove_stale_tmp, tmp_name
    from fairseq_clear.evaluation.senteval.transfer import VectorCache

    name = os.path.basename(tmp_name(str(tmp_path / "summary.json"), "save0"))
    assert name == f".summary.json.tmp-{os.getpid()}@{HOST}-save0"
    assert TEMP_NAME.match(name).group("host") == HOST
    other = "0123abcd" if HOST != "0123abcd" else "4567cdef"
    ours = [f".summary.json.tmp-{DEAD}@{HOST}", f".summary.json.tmp-{DEAD}", f".spm.tmp-{DEAD}@{HOST}.model"]
    theirs = [f".summary.json.tmp-{DEAD}@{other}", f".spm.tmp-{DEAD}@{other}-x1.model"]
    for entry in ours + theirs:
        (tmp_path / entry).write_bytes(b"x")
    assert sorted(remove_stale_tmp(str(tmp_path), own=False)) == sorted(ours)
    assert sorted(os.listdir(tmp_path)) == sorted(theirs)
    # the vector cache's own cleanup goes through the same rule
    cache = VectorCache(str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "model-0123abcd"
    folder.mkdir(parents=True)
    entry = "STSB-" + "0" * 24 + ".npz"
    stale = [f".{entry}.tmp-{DEAD}@{HOST}", f".{entry}.sha256.tmp-{DEAD}"]
    for left in stale + [f".{entry}.tmp-{DEAD}@{other}"]:
        (folder / left).write_bytes(b"x")
    cache.entries()
    assert os.listdir(folder) == [f".{entry}.tmp-{DEAD}@{other}"]
