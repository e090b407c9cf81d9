"""Distributed faults on CPU with 2 gloo ranks.

* The all-gather with unequal sizes (including a rank with no sentences, which feeds
  fairseq's dummy batch) gives the same loss and gradients as one process holding the
  concatenated batch: for the bare losses and for the whole criterion (MLM + NT-Xent
  or SimCSE, normalisers exchanged across ranks).
* ``torchrun`` + ``fairseq-train`` with one rank's shard smaller than the other's, or
  empty: training proceeds (dummy batches) and the logged batches hold only real data.
* A rank killed with SIGKILL makes the whole job exit, with an error naming the dead
  rank, within a bounded time instead of hanging.
"""

import os
import signal
import time

import pytest
import torch

from harness import dist_check
from harness.runs import logged, run_until, torchrun_workers
from helpers import EXCLUSIVE, make_binarized, run_cli, synthetic_sentences, torchrun, train_args

pytestmark = EXCLUSIVE

SIZES = [(1, 1), (3, 1), (2, 0), (0, 3), (4, 4)]
CASES = (
    [(s, "nt-xent", "criterion") for s in SIZES]
    + [(s, "simcse", "criterion") for s in [(3, 1), (2, 0)]]
    + [(s, "nt-xent", "loss") for s in [(1, 1), (3, 1), (0, 3)]]
    + [(s, "simcse", "loss") for s in [(2, 3)]]
)


@pytest.fixture(scope="module")
def gathered():
    return dist_check.run(CASES)


@pytest.mark.parametrize("index", range(len(CASES)),
                         ids=[f"{c[2]}-{c[1]}-{c[0][0]}+{c[0][1]}" for c in CASES])
def test_gather_with_unequal_sizes_equals_one_process(gathered, index):
    sizes, loss_form, level = CASES[index]
    got = gathered[index]
    want = dist_check.reference(sizes, loss_form, level)
    assert got["loss_over_size"] == pytest.approx(want["loss_over_size"], rel=1e-5, abs=1e-6)
    assert got["grads"].keys() == want["grads"].keys()
    for name in want["grads"]:
        assert torch.allclose(got["grads"][name], want["grads"][name], rtol=1e-4, atol=1e-6), name
    # the contrastive part is really there: the projection receives gradient
    assert want["grads"]["proj.weight"].abs().sum() > 0


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """40 training sentences: with --batch-size 16, 3 batches (16, 16, 8) per epoch."""
    work = tmp_path_factory.mktemp("small_data")
    return make_binarized(work, synthetic_sentences(40, seed=3), synthetic_sentences(10, seed=4))


@pytest.fixture(scope="module")
def one_batch_data(tmp_path_factory):
    """10 training sentences: one batch per epoch, so rank 1's shard is always empty."""
    work = tmp_path_factory.mktemp("one_batch_data")
    return make_binarized(work, synthetic_sentences(10, seed=5), synthetic_sentences(10, seed=6),
                          vocab_size=80)


@pytest.mark.parametrize("which,ddp_backend", [
    ("smaller-shard", "pytorch_ddp"), ("smaller-shard", "legacy_ddp"), ("empty-shard", "pytorch_ddp"),
])
def test_uneven_and_empty_shards_train(request, tmp_path, which, ddp_backend):
    data = request.getfixturevalue("small_data" if which == "smaller-shard" else "one_batch_data")
    args = train_args(data, tmp_path / "save", "--distributed-backend", "gloo",
                      "--ddp-backend", ddp_backend, max_update=6, batch_size=16)
    proc = run_cli(torchrun(args), timeout=600)
    records = logged(proc.stdout)
    # one log stream (rank 0) of the 2-rank job, not two independent runs
    assert "distributed init (rank 1)" in proc.stdout, proc.stdout[-3000:]
    assert [int(r["num_updates"]) for r in records] == list(range(1, 7)), proc.stdout[-3000:]
    assert all(r["loss"] not in ("nan", "inf") and float(r["loss"]) > 0 for r in records)
    per_epoch = {}
    for r in records:
        per_epoch.setdefault(int(r["epoch"]), []).append(int(float(r["bsz"])))
    complete = [e for e in per_epoch if e < max(per_epoch)]
    assert complete, per_epoch
    if which == "smaller-shard":
        # batches of 16, 16 and 8 sentences: rank 0 gets two, rank 1 one batch and then
        # a dummy batch; every sentence counts once per epoch, dummies not at all
        for e in complete:
            assert len(per_epoch[e]) == 2 and sum(per_epoch[e]) == 40, per_epoch
        assert any(b < 32 for e in complete for b in per_epoch[e]), per_epoch
    else:
        # one batch of 10 sentences per epoch: rank 1 only ever has dummy batches
        for e in complete:
            assert per_epoch[e] == [10], per_epoch
    assert all("cl_loss" in r for r in records)
    assert (tmp_path / "save" / "checkpoint_last.pt").is_file()


def test_dead_rank_ends_the_job_quickly(tiny_data, tmp_path):
    """SIGKILL one worker mid-training: torchrun stops the job and exits non-zero naming the
    killed rank, within seconds; nobody waits for a collective that can never finish."""
    args = train_args(tiny_data, tmp_path / "save", "--distributed-backend", "gloo",
                      max_update=100000, batch_size=8)
    state = {}

    def kill_rank1(line):
        if "at" not in state and '"num_updates": "3"' in line and "| train_inner |" in line:
            workers = torchrun_workers(state["proc"].pid)
            assert sorted(workers) == [0, 1], workers
            os.kill(workers[1], signal.SIGKILL)
            state["at"] = time.monotonic()
        return False

    out, rc, _ = run_until(torchrun(args), kill_rank1, timeout=300,
                           on_start=lambda proc: state.update(proc=proc))
    took = time.monotonic() - state["at"]
    assert rc not in (0, None), out[-2000:]
    assert took < 60, f"took {took:.0f}s to exit"
    assert "ChildFailedError" in out and "Signal 9 (SIGKILL)" in out, out[-3000:]
    # the survivor either failed in its collective ("Connection closed by peer") or was
    # stopped by torchrun first; either way the job is over
    assert '"num_updates": "100000"' not in out


def test_contrastive_problem_across_update_freq_on_two_ranks(small_data, tmp_path):
    """--accumulate-contrastive with --update-freq 2 on 2 gloo ranks (legacy_ddp), with a momentum queue:
    per epoch rank 0 holds batches of 16 and 8, rank 1 one of 16 and then a stand-in batch as its LAST
    micro-batch (fairseq's ignore_grad would zero the whole update's contrastive term there); every update
    trains with finite losses, and pytorch_ddp is refused naming the backend.

    Resume on 2 ranks: fairseq reads a checkpoint on rank 0 and sends it to the others (broadcast_object),
    whose torch.load (weights_only on torch >= 2.6) refused its config (a DictConfig): every run on 2 ranks
    failed to resume. Restarted from its update-2 checkpoint, the run logs the uninterrupted run's update 3
    and ends with its weights, queue and momentum encoder, bit for bit."""
    import shutil

    from harness.runs import by_update, load_state

    common = ["--distributed-backend", "gloo", "--update-freq", "2", "--accumulate-contrastive"]
    args = [a for a in train_args(small_data, tmp_path / "save", *common, "--ddp-backend", "legacy_ddp",
                                  "--queue-size", "40", max_update=3, batch_size=16)
            if a != "--no-epoch-checkpoints"]  # checkpoint2.pt: the end of epoch 2, update 2
    proc = run_cli(torchrun(args), timeout=600)
    records = logged(proc.stdout)
    assert "distributed init (rank 1)" in proc.stdout, proc.stdout[-3000:]
    assert [int(r["num_updates"]) for r in records] == [1, 2, 3], proc.stdout[-3000:]
    # one update = the whole epoch (fairseq logs rank 0's 24 sentences: a rank whose last
    # micro-batch is a stand-in has its statistics dropped by fairseq's trainer)
    assert [int(float(r["bsz"])) for r in records] == [24, 24, 24], [r.get("bsz") for r in records]
    assert all(float(r["cl_loss"]) > 0 and r["loss"] not in ("nan", "inf") for r in records)

    (tmp_path / "resumed").mkdir()
    shutil.copy(tmp_path / "save" / "checkpoint2.pt", tmp_path / "resumed" / "checkpoint_last.pt")
    resumed = run_cli(torchrun([tmp_path / "resumed" if a == tmp_path / "save" else a for a in args]), timeout=600)
    assert "Weights only load failed" not in resumed.stdout
    assert "@ 2 updates)" in resumed.stdout, resumed.stdout[-3000:]
    again = by_update(logged(resumed.stdout))
    assert sorted(again) == [3] and again[3]["loss"] == by_update(records)[3]["loss"], (again, records)
    ends = [load_state(tmp_path / name / "checkpoint_last.pt") for name in ("save", "resumed")]
    assert ends[0]["criterion"]["momentum_queue.vectors"].shape[0] == 40
    for part in ("model", "criterion"):
        assert ends[0][part].keys() == ends[1][part].keys()
        assert all(torch.equal(ends[0][part][k], ends[1][part][k]) for k in ends[0][part]), part

    bad = run_cli(torchrun(train_args(small_data, tmp_path / "bad", *common, "--ddp-backend", "pytorch_ddp",
                                      max_update=1, batch_size=16)), check=False, timeout=600)
    assert bad.returncode != 0 and "--accumulate-contrastive with several ranks needs --ddp-backend legacy_ddp" \
        in bad.stdout
