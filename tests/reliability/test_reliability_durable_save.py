"""Checkpoints survive a full disk, a second run, a kill and a flipped bit (fairseq_fixes/)."""

import errno
import os
from pathlib import Path

import pytest
import torch

import fairseq_clear  # noqa: F401
from fairseq import checkpoint_utils
from fairseq_clear.checkpoint_safety import CorruptCheckpointError, safe_load, zip_damage
from fairseq_clear.fairseq_fixes import durable_save, save_dir_lock
from harness.runs import logged
from helpers import run_cli, train_args

FAULTS = str(Path(__file__).parents[1] / "support" / "fault_injection")


def _train(data, save, *extra, faults="", max_update=4, check=True):
    env = {}
    if faults:  # the fault injection is start-up code (a sitecustomize): a real process runs it
        env = {"PYTHONPATH": os.pathsep.join([FAULTS, os.environ.get("PYTHONPATH", "")]),
               "CLEAR_FAULT_SAVE_FAILURES": faults}
    return run_cli(train_args(data, save, "--save-interval-updates", "2", "--no-epoch-checkpoints", *extra,
                              max_update=max_update), env=env, check=check)


def _failing_save(monkeypatch, failures=1):
    real = torch.save
    left = [failures]

    def save(obj, f, *args, **kwargs):
        if left[0] > 0:
            left[0] -= 1
            f.write(b"PK\x03\x04" + b"\0" * 4096)
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)


def test_fairseqs_own_retry_writes_a_corrupt_file_ours_does_not(tmp_path, monkeypatch, plugin_run):
    """The bug, in fairseq's function itself, and the fix on the same fault."""
    monkeypatch.setattr("time.sleep", lambda s: None)
    original = checkpoint_utils.torch_persistent_save.__wrapped__
    state = {"model": {"w": torch.randn(64, 64)}, "step": 3}
    _failing_save(monkeypatch)
    original(state, str(tmp_path / "fairseq.pt"))
    assert zip_damage(tmp_path / "fairseq.pt") is not None, "fairseq's retry no longer corrupts: fix obsolete?"

    _failing_save(monkeypatch)
    checkpoint_utils.torch_persistent_save(state, str(tmp_path / "ours.pt"))
    assert zip_damage(tmp_path / "ours.pt") is None
    assert torch.equal(safe_load(tmp_path / "ours.pt")["model"]["w"], state["model"]["w"])
    assert sorted(os.listdir(tmp_path)) == ["fairseq.pt", "ours.pt"]  # no temporary files left


def test_a_save_that_keeps_failing_never_replaces_the_good_file(tmp_path, monkeypatch, plugin_run):
    monkeypatch.setattr("time.sleep", lambda s: None)
    good = {"w": torch.ones(3)}
    target = tmp_path / "checkpoint_last.pt"
    torch.save(good, target)
    before = target.read_bytes()
    _failing_save(monkeypatch, failures=10)
    with pytest.raises(durable_save.CheckpointWriteError, match="previous checkpoint files are unchanged"):
        checkpoint_utils.torch_persistent_save({"w": torch.zeros(3)}, str(target))
    assert target.read_bytes() == before
    assert os.listdir(tmp_path) == ["checkpoint_last.pt"]


def test_transient_disk_full_during_training(tiny_data, tmp_path):
    save = tmp_path / "save"
    # the 2nd save of the run (update 4's checkpoint) meets a full disk once
    proc = _train(tiny_data, save, faults="2")
    assert "No space left on device (injected)" in proc.stdout
    state = safe_load(save / "checkpoint_last.pt")
    assert state["optimizer_history"][-1]["num_updates"] == 4
    assert not [n for n in os.listdir(save) if ".tmp" in n], os.listdir(save)
    # and a restart from it works (and, the run being finished, does nothing)
    assert "nothing to do" in _train(tiny_data, save).stdout


def test_persistent_disk_full_fails_loudly_and_keeps_the_last_good_checkpoint(tiny_data, tmp_path):
    save = tmp_path / "save"
    _train(tiny_data, save, max_update=2)
    good = (save / "checkpoint_last.pt").read_bytes()
    proc = _train(tiny_data, save, faults="1,2,3,4,5,6", check=False)
    assert proc.returncode != 0
    assert "could not write checkpoint" in proc.stdout
    assert (save / "checkpoint_last.pt").read_bytes() == good
    assert not [n for n in os.listdir(save) if ".tmp" in n], os.listdir(save)


def test_restart_of_a_finished_run_does_nothing(tiny_data, tmp_path):
    save = tmp_path / "save"
    _train(tiny_data, save)
    last = (save / "checkpoint_last.pt").read_bytes()
    for _ in range(3):  # as after kills between the final save and exit
        proc = _train(tiny_data, save)
        assert "nothing to do" in proc.stdout and "--max-update 4" in proc.stdout
        assert logged(proc.stdout) == []
    assert (save / "checkpoint_last.pt").read_bytes() == last
    # raising --max-update continues from update 4
    proc = _train(tiny_data, save, max_update=6)
    assert [int(r["num_updates"]) for r in logged(proc.stdout)][-1] == 6


def test_second_run_on_a_save_dir_is_refused(tiny_data, tmp_path):
    save = tmp_path / "save"
    save_dir_lock.acquire(save)  # this process plays the first run
    try:
        proc = _train(tiny_data, save, check=False)
    finally:
        save_dir_lock._held.pop(str(save.resolve())).close()
    assert proc.returncode != 0
    assert "is in use by another fairseq-train run" in proc.stdout and f'"pid": {os.getpid()}' in proc.stdout
    assert not (save / "checkpoint_last.pt").exists()
    _train(tiny_data, save, max_update=2)  # once released, the directory is usable


def test_only_our_orphaned_temporary_files_are_removed(tiny_data, tmp_path):
    save = tmp_path / "save"
    save.mkdir()
    dead = save / ".checkpoint_last.pt.tmp-999999-copy"   # a killed run of ours
    dead_save = save / ".checkpoint_1_2.pt.tmp-999998-save0"
    alive = save / f".checkpoint_last.pt.tmp-{os.getpid()}-copy"  # a live process
    foreign = save / "checkpoint_last.pt.tmp"  # fairseq's own name: not ours to delete
    notes = save / "notes.tmp-copy-x"
    for p in (dead, dead_save, alive, foreign, notes):
        p.write_bytes(b"x")
    proc = _train(tiny_data, save, max_update=2)
    assert not dead.exists() and not dead_save.exists()
    assert alive.exists() and foreign.exists() and notes.exists()
    assert "removed 2 temporary file(s)" in proc.stdout


def test_a_flipped_bit_is_caught_at_load(tiny_data, tmp_path):
    from fairseq_clear.models import ClearRobertaModel

    save = tmp_path / "save"
    _train(tiny_data, save, max_update=2)
    path = save / "checkpoint_last.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10  # inside the tensor data
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="CRC-32"):
        safe_load(path)
    with pytest.raises(CorruptCheckpointError, match="CRC-32"):
        ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(tiny_data))
    proc = _train(tiny_data, save, check=False)  # resume refuses it too
    assert proc.returncode != 0 and "CRC-32" in proc.stdout
