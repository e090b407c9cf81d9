"""The plugin's guarantees hold on every fairseq entry point, decided by what the run builds.

fairseq-hydra-train imports the --user-dir inside its main, after its call_main, and
fairseq-validate builds what the checkpoint's config names whatever its --task: the scope opens
as the plugin's components are built (fairseq_fixes/scope.py, component_built), and checkpoint
loading reads a checkpoint's own config first (checkpoint_loading.py). Here, under
fairseq-hydra-train with a shipped YAML: the --save-dir lock, "nothing to do" at max_update, a
crafted pickle refused with torch's unsafe loading forced on, a flipped bit, bit-exact resume
after SIGKILL; under fairseq-validate with another --task: the scope, and the crafted pickle.
"""

import shutil
import signal

import torch

from fairseq_clear.fairseq_fixes import save_dir_lock
from harness.runs import load_state, logged, max_abs_diff, optimizer_tensors, run_until, saved_at
from helpers import EXCLUSIVE, USER_DIR, bin_path, hydra_args, run_cli
from hostile import evil_checkpoint

SCOPE_LINE = "the plugin's fixes act in this run"


def _hydra(data, save, *overrides, env=None, check=True, cwd=None):
    return run_cli(hydra_args("clear_tiny_cpu", data, save, "common.log_interval=1", *overrides),
                   cwd=cwd or save.parent, env=env, check=check)


def test_under_hydra_a_second_run_on_a_save_dir_is_refused(tiny_data, tmp_path):
    save = tmp_path / "save"
    save_dir_lock.acquire(save)  # this process plays the first run
    try:
        proc = _hydra(tiny_data, save, "optimization.max_update=2", check=False)
    finally:
        save_dir_lock._held.pop(str(save.resolve())).close()
    assert proc.returncode != 0 and "is in use by another fairseq-train run" in proc.stdout, proc.stdout[-2000:]
    assert not list(save.glob("checkpoint*.pt")) and logged(proc.stdout) == []
    _hydra(tiny_data, save, "optimization.max_update=2")  # once released, the directory is usable
    assert (save / save_dir_lock.LOCK_NAME).exists() and (save / "checkpoint_last.pt").exists()


def test_under_hydra_a_finished_run_does_nothing_and_a_flipped_bit_is_refused(tiny_data, tmp_path):
    save = tmp_path / "save"
    _hydra(tiny_data, save, "optimization.max_update=3")
    last = (save / "checkpoint_last.pt").read_bytes()
    proc = _hydra(tiny_data, save, "optimization.max_update=3")
    assert "nothing to do" in proc.stdout and "--max-update 3" in proc.stdout and logged(proc.stdout) == []
    assert (save / "checkpoint_last.pt").read_bytes() == last
    damaged = bytearray(last)
    damaged[len(damaged) // 2] ^= 0x10  # inside the tensor data
    (save / "checkpoint_last.pt").write_bytes(bytes(damaged))
    proc = _hydra(tiny_data, save, "optimization.max_update=6", check=False)
    assert proc.returncode != 0 and "CRC-32" in proc.stdout and logged(proc.stdout) == [], proc.stdout[-2000:]


def test_under_hydra_a_crafted_checkpoint_runs_nothing(plain_checkpoint, tiny_data, tmp_path):
    """With torch's unsafe loading forced on (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1), a checkpoint with a
    pickle gadget is refused on resume and as --restore-file, and its code does not run."""
    marker = tmp_path / "ran"
    evil = evil_checkpoint(plain_checkpoint, tmp_path / "evil.pt", marker)
    force = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    resume = tmp_path / "resume"
    resume.mkdir()
    shutil.copy(evil, resume / "checkpoint_last.pt")
    for save, extra in ((resume, []), (tmp_path / "restore", [f"checkpoint.restore_file={evil}"])):
        proc = _hydra(tiny_data, save, "optimization.max_update=3", *extra, env=force, check=False)
        assert proc.returncode != 0 and "refusing to load checkpoint" in proc.stdout, proc.stdout[-2000:]
        assert "UnsafeCheckpointError" in proc.stdout and logged(proc.stdout) == []
        assert not marker.exists()


@EXCLUSIVE
def test_under_hydra_a_killed_run_resumes_bit_exactly(tiny_data, tmp_path):
    """SIGKILL right after the update-3 save, then the same command: the weights and optimizer state
    at update 6 equal those of a run that was never interrupted."""
    def command(save):
        return hydra_args("clear_tiny_cpu", tiny_data, save, "optimization.max_update=6",
                          "checkpoint.save_interval_updates=3", "common.log_interval=1")

    out, rc, _ = run_until(command(tmp_path / "full"), lambda line: False, cwd=tmp_path)
    assert rc == 0, out[-2000:]
    out, rc, killed = run_until(command(tmp_path / "killed"), saved_at(3), sig=signal.SIGKILL, cwd=tmp_path)
    assert killed and rc == -signal.SIGKILL, out[-2000:]
    out, rc, _ = run_until(command(tmp_path / "killed"), lambda line: False, cwd=tmp_path)
    assert rc == 0 and [int(r["num_updates"]) for r in logged(out)] == [4, 5, 6], out[-2000:]
    full, resumed = load_state(tmp_path / "full" / "checkpoint_last.pt"), load_state(tmp_path / "killed" / "checkpoint_last.pt")
    assert max(max_abs_diff(full["model"], resumed["model"]).values()) == 0
    assert max(max_abs_diff(optimizer_tensors(full), optimizer_tensors(resumed)).values()) == 0


def _validate(data, path, task, env=None):
    return run_cli([bin_path("fairseq-validate"), data, "--user-dir", USER_DIR, "--task", task, "--path", path,
                    "--batch-size", "8", "--cpu", "--log-format", "json"], env=env, check=False)


def test_validate_with_another_task_runs_the_checkpoint_in_the_scope(plain_checkpoint, tiny_data):
    """--task masked_lm with a CLEAR checkpoint: fairseq builds the checkpoint's clear task, and the run
    is the plugin's from there (it was outside the scope, deciding by --task)."""
    proc = _validate(tiny_data, plain_checkpoint, "masked_lm")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert f"{SCOPE_LINE} (from its task ClearTask on)" in proc.stdout
    (record,) = logged(proc.stdout, "valid")
    assert float(record["valid_loss"]) > 0 and "valid_cl_loss" in record  # the clear criterion's terms


def test_validate_refuses_a_crafted_checkpoint_whatever_its_task(plain_checkpoint, tiny_data, tmp_path):
    marker = tmp_path / "ran"
    evil = evil_checkpoint(plain_checkpoint, tmp_path / "evil.pt", marker)
    for task in ("masked_lm", "clear"):
        proc = _validate(tiny_data, evil, task, env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
        assert proc.returncode != 0 and f"refusing to load checkpoint '{evil}'" in proc.stdout, proc.stdout[-2000:]
        assert not marker.exists()


def test_a_checkpoint_is_judged_by_its_own_config_read_as_plain_data(plain_checkpoint, tmp_path):
    """Outside a run, fairseq's loader reads a stock checkpoint itself; one whose config (or legacy
    args) names the plugin, or that is not plain data, goes through the plugin's safe reading."""
    import argparse

    from fairseq_clear.checkpoint_safety import names_plugin

    stock = tmp_path / "lm.pt"
    torch.save({"cfg": {"task": {"_name": "language_modeling"}, "model": {"_name": "transformer_lm"},
                        "criterion": {"_name": "cross_entropy"}}, "model": {}}, stock)
    legacy = tmp_path / "legacy.pt"
    torch.save({"args": argparse.Namespace(arch="clear_roberta_tiny", task="masked_lm", criterion="masked_lm")}, legacy)
    evil = evil_checkpoint(plain_checkpoint, tmp_path / "evil.pt", tmp_path / "ran")
    assert names_plugin(stock) is False and names_plugin(plain_checkpoint) is True and names_plugin(legacy) is True
    assert names_plugin(evil) is None and names_plugin(tmp_path / "missing.pt") is None
    assert not (tmp_path / "ran").exists()
