"""Exact resume: a run killed with SIGKILL mid-epoch and restarted with the same command
ends exactly where an uninterrupted run ends (weights, optimizer state, logged losses).

Both runs are the real ``fairseq-train`` CLI. What makes this hold: views are keyed by
(seed, epoch, index, view), fairseq's masking by numpy_seed(seed, epoch, index), dropout
by a torch seed per update, and the data iterator's position is in the checkpoint. With
``--num-workers > 0`` the task builds a fresh DataLoader every epoch (see
``ClearTask.get_batch_iterator``); the second case fails without that fix.
"""

import signal

import torch

import pytest

from harness.runs import (
    by_update,
    load_state,
    logged,
    max_abs_diff,
    optimizer_tensors,
    run_until,
    saved_at,
)
from helpers import EXCLUSIVE, train_args

pytestmark = EXCLUSIVE

MAX_UPDATE = 28
SAVE_EVERY = 8
# 600 sentences / 32 per batch = 19 updates per epoch: update 8 is in epoch 1,
# update 24 in epoch 2 (after fairseq has moved to a new epoch and reset its loader).
LOGGED_KEYS = ("loss", "mlm_loss", "cl_loss", "cl_acc", "gnorm", "lr", "ppl")


def command(data, save_dir, num_workers):
    args = train_args(
        data, save_dir, "--save-interval-updates", str(SAVE_EVERY),
        max_update=MAX_UPDATE, batch_size=32,
    )
    args[args.index("--num-workers") + 1] = str(num_workers)
    return args


def never(_line):
    return False


@pytest.mark.parametrize(
    "num_workers,kill_after",
    [(0, 8), (1, 24)],
    ids=["main-process-loader-epoch1", "worker-loader-epoch2"],
)
def test_sigkill_mid_epoch_then_same_command_matches_uninterrupted_run(
    tiny_data, tmp_path, num_workers, kill_after
):
    full_dir, killed_dir = tmp_path / "full", tmp_path / "killed"

    full_out, rc, _ = run_until(command(tiny_data, full_dir, num_workers), never)
    assert rc == 0, full_out[-3000:]

    killed_out, rc, killed = run_until(
        command(tiny_data, killed_dir, num_workers), saved_at(kill_after), sig=signal.SIGKILL
    )
    assert killed and rc == -signal.SIGKILL, f"not killed (rc={rc}):\n{killed_out[-2000:]}"

    # the restart point is in the middle of an epoch
    at_kill = load_state(killed_dir / "checkpoint_last.pt")
    resumed_from = at_kill["optimizer_history"][-1]["num_updates"]
    position = at_kill["extra_state"]["train_iterator"]
    assert kill_after <= resumed_from < MAX_UPDATE
    assert position["iterations_in_epoch"] > 0, position

    resumed_out, rc, _ = run_until(command(tiny_data, killed_dir, num_workers), never)
    assert rc == 0, resumed_out[-3000:]
    assert f"@ {resumed_from} updates)" in resumed_out and "Loaded checkpoint" in resumed_out

    full = by_update(logged(full_out))
    before = by_update(logged(killed_out))
    after = by_update(logged(resumed_out))
    assert sorted(full) == list(range(1, MAX_UPDATE + 1))
    assert sorted(after) == list(range(resumed_from + 1, MAX_UPDATE + 1))
    mismatches = []
    for update, record in list(before.items()) + list(after.items()):
        for key in LOGGED_KEYS:
            if record.get(key) != full[update].get(key):
                mismatches.append((update, key, full[update].get(key), record.get(key)))
    assert not mismatches, f"logged values differ (update, key, uninterrupted, resumed): {mismatches[:10]}"

    a = load_state(full_dir / "checkpoint_last.pt")
    b = load_state(killed_dir / "checkpoint_last.pt")
    assert a["optimizer_history"][-1]["num_updates"] == b["optimizer_history"][-1]["num_updates"] == MAX_UPDATE
    weights = max_abs_diff(a["model"], b["model"])
    assert max(weights.values()) <= 1e-6, sorted(weights.items(), key=lambda kv: -kv[1])[:5]
    moments = max_abs_diff(optimizer_tensors(a), optimizer_tensors(b))
    assert moments and max(moments.values()) <= 1e-6
    assert a["extra_state"]["train_iterator"] == b["extra_state"]["train_iterator"]


def _views_per_epoch(task, num_workers, use_fairseq_default):
    from fairseq.tasks import FairseqTask

    get = FairseqTask.get_batch_iterator if use_fairseq_default else type(task).get_batch_iterator
    itr = get(
        task, task.dataset("train"), max_sentences=64, seed=1, num_workers=num_workers, epoch=1,
        disable_iterator_cache=True,
    )
    from harness.runs import epoch_batches

    epochs = epoch_batches(task, "train", itr, 2)
    return [
        {int(i): (b["contrastive"]["src_tokens"][k], b["net_input"]["src_tokens"][k])
         for b in batches for k, i in enumerate(b["id"])}
        for batches in epochs
    ]


def test_worker_loaders_see_each_new_epoch(tiny_data):
    """Views and masks of epoch 2 drawn in a DataLoader worker equal those drawn in-process."""
    from harness.runs import build_task

    task, _ = build_task(tiny_data, "--tokens-per-sample", "64")
    reference = _views_per_epoch(task, 0, use_fairseq_default=False)
    in_worker = _views_per_epoch(task, 1, use_fairseq_default=False)
    stale = _views_per_epoch(task, 1, use_fairseq_default=True)

    def same(a, b):
        return all(torch.equal(a[i][0], b[i][0]) and torch.equal(a[i][1], b[i][1]) for i in a)

    assert not same(reference[0], reference[1]), "views/masks must change between epochs"
    assert same(reference[0], in_worker[0]) and same(reference[1], in_worker[1])
    # what the task's get_batch_iterator prevents: fairseq's persistent worker keeps epoch 1
    assert same(stale[1], reference[0]) and not same(stale[1], reference[1])
