"""ESimCSE's momentum queue (--queue-size, --queue-momentum): the loss with a queue equals a brute-force
computation with the queued vectors as extra columns (float64), the criterion queues the momentum
encoder's vectors of past positives (FIFO, duplicates masked, EMA once per update, held micro-batches
with --accumulate-contrastive), and the queue and momentum encoder survive a save/load round trip and a
SIGKILL of fairseq-train (the 2-rank check: test_momentum_queue_ranks.py)."""

import math
import re

import criterion_helpers as ch
import pytest
import torch

from fairseq_clear import losses

TAU = 0.05


def _vectors(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _cos(u, v):
    return float(u @ v / (u.norm() * v.norm()))


def brute_force(anchors, positives, others, queue, tau, masked=()):
    """Σ_a -log e^{cos(a, p_a)/τ} / (Σ over a's candidates and every queued vector not masked)."""
    total = 0.0
    for a, (x, p, negs) in enumerate(zip(anchors, positives, others)):
        columns = [p] + negs + [q for j, q in enumerate(queue) if (a, j) not in masked]
        denominator = sum(math.exp(_cos(x, c) / tau) for c in columns)
        total += -math.log(math.exp(_cos(x, p) / tau) / denominator)
    return total


def test_nt_xent_with_a_queue_equals_the_brute_force():
    m, q = 4, 5
    z1, z2, queue = _vectors(m, 6, seed=1), _vectors(m, 6, seed=2), _vectors(q, 6, seed=3)
    z = torch.cat([z1, z2])
    mask = torch.zeros(2 * m, q, dtype=torch.bool)
    mask[1, 2] = mask[5, 0] = True
    ours, _ = losses.nt_xent(z1, z2, TAU, queue=queue, queue_mask=mask)
    anchors = list(z)
    positives = [z[(a + m) % (2 * m)] for a in range(2 * m)]
    others = [[z[k] for k in range(2 * m) if k not in (a, (a + m) % (2 * m))] for a in range(2 * m)]
    assert ours.item() == pytest.approx(brute_force(anchors, positives, others, list(queue), TAU, {(1, 2), (5, 0)}),
                                        rel=1e-10)
    assert ours.item() > losses.nt_xent(z1, z2, TAU)[0].item()  # more negatives, larger loss


def test_simcse_with_a_queue_equals_the_brute_force_also_per_prefix():
    m, q = 3, 4
    z1, z2, z3, queue = (_vectors(n, 8, seed=s) for n, s in ((m, 4), (m, 5), (m, 6), (q, 7)))
    ours, _ = losses.simcse(z1, z2, TAU, z3=z3, queue=queue, dims=[8, 4], dim_weights=[1.0, 0.5])
    expected = 0.0
    for d, w in ((8, 1.0), (4, 0.5)):
        a, p, h, qd = z1[:, :d], z2[:, :d], z3[:, :d], queue[:, :d]
        others = [[p[j] for j in range(m) if j != i] + list(h) for i in range(m)]
        expected += w * brute_force(list(a), list(p), others, list(qd), TAU)
    assert ours.item() == pytest.approx(expected, rel=1e-10)


# ---- the criterion ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def setup(tiny_data):
    """(task, model, config) of --queue-size 8 --mask-duplicates, built once: each test builds its criterion."""
    return ch.build(tiny_data, "--mlm", "off", "--queue-size", "8", "--mask-duplicates")


def test_the_queue_holds_past_positives_and_is_an_extra_column_of_the_loss(setup):
    task, model, _ = setup
    criterion = ch.criterion(setup)
    queue = criterion.queue
    first, second = ch.batch(task, range(0, 6)), ch.batch(task, range(6, 12))
    ch.forward(criterion, model, first)
    with torch.no_grad():  # the momentum encoder is the model's copy at the first update, without dropout
        model.eval()
        expected = model(first["contrastive"]["src_tokens"][6:], contrastive=True)[0]
    torch.testing.assert_close(queue.vectors, expected.float())
    before = queue.vectors.clone()
    logs, z = ch.forward(criterion, model, second, seed=1)
    ours, _ = losses.nt_xent(z[:6].double(), z[6:].double(), criterion.cfg.temperature, queue=before.double())
    assert logs["cl_loss"].item() == pytest.approx(ours.item(), rel=1e-5)
    plain, _ = losses.nt_xent(z[:6], z[6:], criterion.cfg.temperature)
    assert logs["cl_loss"].item() > plain.item() + 1e-3
    assert queue.vectors.shape[0] == 8  # FIFO: 12 pushed, the last 8 kept
    torch.testing.assert_close(queue.vectors[:2], before[-2:])


def test_queued_duplicates_of_the_anchors_pair_are_masked(setup):
    task, model, _ = setup
    criterion = ch.criterion(setup)
    ch.forward(criterion, model, ch.batch(task, range(40, 42)))
    same = ch.batch(task, range(20, 26))
    ch.forward(criterion, model, same)
    queued = criterion.queue.vectors.clone()  # the last 6: this batch's pairs
    logs, z = ch.forward(criterion, model, same, seed=2)
    mask = torch.zeros(12, 8, dtype=torch.bool)
    for i in range(6):  # anchor i (both directions) shares its sentence with queued row 2 + i
        mask[i, 2 + i] = mask[6 + i, 2 + i] = True
    ours, _ = losses.nt_xent(z[:6].double(), z[6:].double(), criterion.cfg.temperature, queue=queued.double(),
                             queue_mask=mask)
    assert logs["cl_loss"].item() == pytest.approx(ours.item(), rel=1e-5)
    # dup_masked counts the queued candidates masked with the in-batch ones (none in-batch: 6 distinct pairs)
    assert int(logs["dup_masked"]) == int(mask.sum()) == 12


def test_the_momentum_encoder_moves_once_per_update(setup):
    task, model, _ = setup
    criterion = ch.criterion(setup)
    ch.forward(criterion, model, ch.batch(task, range(0, 2)))
    encoder = criterion.queue.encoder
    old = [p.detach().clone() for p in encoder.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    ch.forward(criterion, model, ch.batch(task, range(30, 36)))
    m = criterion.cfg.queue_momentum
    for ema, before, live in zip(encoder.parameters(), old, model.parameters()):
        torch.testing.assert_close(ema, m * before + (1 - m) * live.detach(), rtol=1e-5, atol=1e-6)
    assert not any(p.requires_grad for p in encoder.parameters())
    assert not any(p.requires_grad for p in criterion.parameters())  # nothing of it is trained


def test_a_save_and_load_round_trip_keeps_the_queue_and_the_next_loss(setup):
    task, model, _ = setup
    criterion = ch.criterion(setup)
    ch.forward(criterion, model, ch.batch(task, range(0, 6)))
    ch.forward(criterion, model, ch.batch(task, range(6, 12)), seed=1)
    state = {k: v.clone() for k, v in criterion.state_dict().items()}
    assert any(k.startswith("momentum_queue.encoder.") for k in state)
    resumed = ch.criterion(setup)
    resumed.load_state_dict(state, strict=True)
    torch.testing.assert_close(resumed.queue.vectors, criterion.queue.vectors, rtol=0, atol=0)
    following = ch.batch(task, range(12, 18))
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    logs, _ = ch.forward(criterion, model, following, seed=3)
    model.load_state_dict(weights)
    logs_resumed, _ = ch.forward(resumed, model, following, seed=3)
    assert logs_resumed["cl_loss"].item() == logs["cl_loss"].item()  # bit-exact
    for a, b in zip(criterion.queue.encoder.parameters(), resumed.queue.encoder.parameters()):
        assert torch.equal(a, b)
    # resumed with a smaller --queue-size: the newest entries, from the first update on
    smaller = ch.criterion(setup, queue_size=3)
    smaller.load_state_dict(state, strict=True)
    torch.testing.assert_close(smaller.queue.vectors, state["momentum_queue.vectors"][-3:], rtol=0, atol=0)
    assert smaller.queue.keys is None or len(smaller.queue.keys) == 3


def test_accumulated_micro_batches_push_their_positives_after_the_one_loss(setup):
    from fairseq_clear.tasks.contrastive import Step

    task, model, _ = setup
    criterion = ch.criterion(setup, accumulate_contrastive=True)
    ch.forward(criterion, model, ch.batch(task, range(0, 6)))
    before = criterion.queue.vectors.clone()
    task.step = Step(0, 2)
    logs, _ = ch.forward(criterion, model, ch.batch(task, range(6, 10)))
    assert torch.equal(criterion.queue.vectors, before)  # held: nothing pushed yet
    task.step = Step(1, 2)
    logs, _ = ch.forward(criterion, model, ch.batch(task, range(10, 14)))
    task.step = None
    assert logs["cl_anchors"] == 16 and criterion.queue.vectors.shape[0] == 8  # 6 + 4 + 4 pushed, 8 kept


def _forked_run(args, stop=None):
    """(output, return code, killed): ``args`` forked from the test's warm interpreter (its own process
    group, as helpers.run_cli), sent SIGKILL at the first line where ``stop(line)`` (a pre-emption)."""
    import os
    import subprocess

    from harness import forked

    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = forked.popen([str(a) for a in args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True)
    if proc is None:
        pytest.skip("the forked runner is off (FAIRSEQ_CLEAR_TESTS_REAL): this test kills a forked run")
    lines, killed = [], False
    for line in proc.stdout:
        lines.append(line)
        if stop is not None and not killed and stop(line):
            proc.kill()
            killed = True
    proc.stdout.close()
    return "".join(lines), proc.wait(timeout=600), killed


def test_fairseq_train_resumes_a_run_with_a_queue_exactly(tiny_data, tmp_path):
    """A run killed by SIGKILL after its checkpoint of update 2 and restarted with the same command logs
    the losses of the run trained to 4 at once, and ends with the same weights, optimizer moments, queue
    and momentum encoder (saved in the checkpoint's criterion state), bit for bit."""
    import signal

    from harness.runs import by_update, load_state, logged, optimizer_tensors, saved_at
    from helpers import train_args

    def command(save):
        return train_args(tiny_data, save, "--queue-size", "20", "--queue-momentum", "0.9",
                          "--save-interval-updates", "2", max_update=4, batch_size=8)

    out, rc, _ = _forked_run(command(tmp_path / "straight"))
    assert rc == 0, out[-3000:]
    straight = by_update(logged(out))
    out, rc, killed = _forked_run(command(tmp_path / "resumed"), saved_at(2))
    assert killed and rc == -signal.SIGKILL, f"not killed (rc={rc}):\n{out[-2000:]}"
    at_kill = load_state(tmp_path / "resumed" / "checkpoint_last.pt")
    assert at_kill["optimizer_history"][-1]["num_updates"] == 2
    assert at_kill["criterion"]["momentum_queue.vectors"].shape[0] == 16  # two batches of 8 queued
    out, rc, _ = _forked_run(command(tmp_path / "resumed"))
    assert rc == 0 and "Loaded checkpoint" in out and "@ 2 updates)" in out, out[-3000:]
    resumed = by_update(logged(out))
    assert sorted(resumed) == [3, 4]
    for update in (3, 4):
        assert resumed[update]["loss"] == straight[update]["loss"], update
        assert resumed[update]["gnorm"] == straight[update]["gnorm"], update
    a, b = (load_state(tmp_path / name / "checkpoint_last.pt") for name in ("straight", "resumed"))
    assert a["criterion"]["momentum_queue.vectors"].shape == (20, 128)
    # the momentum encoder is saved, and is an average of past weights, not the model's copy
    name = "encoder.sentence_encoder.embed_tokens.weight"
    assert not torch.equal(a["criterion"]["momentum_queue.encoder." + name], a["model"][name])
    for part in ("model", "criterion"):
        assert a[part].keys() == b[part].keys()
        assert all(torch.equal(a[part][k], b[part][k]) for k in a[part]), part
    moments = (optimizer_tensors(a), optimizer_tensors(b))
    assert moments[0] and moments[0].keys() == moments[1].keys()
    assert all(torch.equal(moments[0][k], moments[1][k]) for k in moments[0])


def test_a_queue_starts_from_a_checkpoint_without_one_and_fresh_when_fine_tuning(tiny_data, tmp_path):
    """--finetune-from-model (the recipes' start) from a checkpoint whose criterion held nothing: the
    queue and the distillation map start fresh (fairseq's trainer handed them None and the run stopped);
    from a checkpoint with a queue: --finetune-from-model resets the optimizer, and the queue and its
    momentum encoder start fresh with it, where a resume keeps them."""
    from harness.runs import load_state
    from helpers import train_args

    def run(save, *extra):
        out, rc, _ = _forked_run(train_args(tiny_data, save, *extra, max_update=1, batch_size=8))
        assert rc == 0, out[-3000:]
        return out

    run(tmp_path / "plain")
    plain = tmp_path / "plain" / "checkpoint_last.pt"
    assert load_state(plain)["criterion"] is None
    out = run(tmp_path / "queued", "--finetune-from-model", plain, "--queue-size", "20")
    assert "the checkpoint holds no criterion state" in out
    queued = load_state(tmp_path / "queued" / "checkpoint_last.pt")["criterion"]
    assert queued["momentum_queue.vectors"].shape[0] == 8
    out = run(tmp_path / "again", "--finetune-from-model", tmp_path / "queued" / "checkpoint_last.pt",
              "--queue-size", "20")
    assert "--reset-optimizer: the momentum queue starts empty" in out
    again = load_state(tmp_path / "again" / "checkpoint_last.pt")["criterion"]
    assert again["momentum_queue.vectors"].shape[0] == 8  # this run's batch only, not 8 + 8
    out = run(tmp_path / "queued", "--queue-size", "20", "--max-update", "2")  # a resume keeps the queue
    assert "the momentum queue starts empty" not in out
    assert load_state(tmp_path / "queued" / "checkpoint_last.pt")["criterion"]["momentum_queue.vectors"].shape[0] == 16


def test_a_momentum_that_never_moves_is_refused_at_start_up(setup):
    from fairseq_clear.criterions.clear import ClearCriterionError

    with pytest.raises(ClearCriterionError, match=r"^--queue-momentum must be in \[0, 1\), got 1.0$"):
        ch.criterion(setup, queue_momentum=1.0)


@pytest.mark.parametrize("changes,message", [
    ({"queue_size": 0, "queue_momentum": 0.9}, "--queue-momentum 0.9 has no effect without --queue-size; give --queue-size too"),
    ({"distill_temperature": 0.1}, "--distill-temperature 0.1 has no effect without --distill-weight"),
    ({"distill_teacher_temperature": 0.1}, "--distill-teacher-temperature 0.1 has no effect without --distill-weight"),
    ({"sentence_mlm_prob": 0.2}, "--sentence-mlm-prob 0.2 has no effect without --sentence-mlm-weight"),
    ({"guide_margin": 0.1}, "--guide-margin 0.1 has no effect without --guide-model; give --guide-model too"),
    ({"guide_margin_strategy": "relative"}, "--guide-margin-strategy relative has no effect without --guide-model"),
    ({"guide_model": "/nonexistent/guide", "no_guide_filter": True, "distill_weight": 1.0, "guide_margin": 0.1},
     "--guide-margin 0.1 has no effect with --no-guide-filter"),
    ({"guide_model": "/nonexistent/guide", "no_guide_filter": True, "distill_weight": 1.0,
      "guide_margin_strategy": "relative"}, "--guide-margin-strategy relative has no effect with --no-guide-filter"),
    ({"queue_size": 8, "cl_weight": 0.0}, "--queue-size acts on the contrastive loss, which --cl-weight 0 turns off"),
    ({"queue_size": 0, "matryoshka_dims": "8", "cl_weight": 0.0}, "--matryoshka-dims acts on the contrastive loss"),
    ({"queue_size": 0, "hardness_mode": "in_batch_negatives", "hardness_strength": 5.0, "cl_weight": 0.0},
     "--hardness-mode acts on the contrastive loss"),
    ({"queue_size": 8, "gather_negatives": "off", "world_size": 2, "ddp_backend": "legacy_ddp"},
     "--queue-size with --gather-negatives off on 2 ranks: each rank would keep a queue of its own"),
])
def test_an_option_that_would_do_nothing_or_split_the_queue_is_refused(setup, changes, message):
    """Options the run would ignore (their feature is off) and a queue each rank would keep apart
    (which rank 0's checkpoint could not restore on the others) are refused at start-up, named."""
    from fairseq_clear.criterions.clear import ClearCriterionError

    with pytest.raises(ClearCriterionError, match=re.escape(message)):
        ch.criterion(setup, **changes)


@pytest.mark.parametrize("changes,flag", [
    ({"queue_size": 8}, "--queue-size"),
    ({"hardness_mode": "in_batch_negatives", "hardness_strength": 9.0}, "--hardness-mode"),
    ({"matryoshka_dims": "8"}, "--matryoshka-dims"),
    ({"guide_model": "/nonexistent/guide", "distill_weight": 1.0}, "--guide-model"),
    ({"sentence_mlm_weight": 1.0}, "--sentence-mlm-weight"),
])
def test_a_contrastive_option_with_mlm_only_is_refused(tiny_data, changes, flag):
    """--mlm-only trains the masked LM alone: an option of the contrastive loss would be ignored (a guide
    loaded for nothing), so it is refused at start-up in one line naming both, as with --cl-weight 0."""
    from fairseq_clear.criterions.clear import ClearCriterionError

    built = ch.build(tiny_data, "--mlm-only")
    assert built[0].is_contrastive is False
    ch.criterion(built)  # the run without it starts
    with pytest.raises(ClearCriterionError, match=f"^{re.escape(flag)} acts on the contrastive views, which "
                       "--mlm-only leaves out"):
        ch.criterion(built, **changes)


def test_under_bf16_the_momentum_average_is_kept_in_fp32_and_resumes_exactly():
    """A bf16 model moved by small steps: each (1 - m)·(θ - θ_m) of its momentum encoder is mostly below
    half a bf16 unit, so an average kept in bf16 moved 30% of the way; it is kept in fp32 (the encoder's
    weights its rounding), saved as such, and a restored queue continues it bit for bit."""
    from fairseq_clear.momentum_queue import MomentumQueue

    torch.manual_seed(0)
    net = torch.nn.Linear(32, 32).to(torch.bfloat16)
    queue, m = MomentumQueue(4, 0.995), 0.995
    queue.step(net)  # the copy
    start = [p.detach().double() for p in queue.encoder.parameters()]
    exact = [s.clone() for s in start]
    for k in range(60):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.0005)
        queue.step(net)
        exact = [m * e + (1 - m) * p.detach().double() for e, p in zip(exact, net.parameters())]
        if k == 29:
            saved = {n: v.clone() for n, v in queue.state("q.").items()}
            snapshot = [p.detach().clone() for p in net.parameters()]
    for ema, e, s in zip(queue.encoder.parameters(), exact, start):
        assert ema.dtype == torch.bfloat16
        moved, wanted = (ema.double() - s).abs().mean(), (e - s).abs().mean()
        assert abs(moved / wanted - 1) < 0.05, (moved, wanted)
    assert all(v.dtype == torch.float32 for v in saved.values())
    # restored after step 30 into a fresh queue, the next 30 steps land on the same average, bit for bit
    again = MomentumQueue(4, m)
    again.restore(saved, "q.")
    with torch.no_grad():
        for p, v in zip(net.parameters(), snapshot):
            p.copy_(v)
    for _ in range(30):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.0005)
        again.step(net)
    ours, theirs = again.state("q."), queue.state("q.")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert all(torch.equal(a, b) for a, b in zip(again.encoder.parameters(), queue.encoder.parameters()))


def test_the_disk_plan_counts_the_momentum_encoder(tmp_path):
    """A checkpoint of a run with a queue holds the momentum encoder's fp32 average beside the weights and
    Adam's two moments: 4 copies of the weights, where the recipes' disk check counted 3."""
    from fairseq_clear import budget

    weights = 10 * 2 ** 20
    plain, _ = budget.checkpoint_plan("simcse-unsup", weights, str(tmp_path), [], [], 0)
    queued, _ = budget.checkpoint_plan("simcse-unsup", weights, str(tmp_path), ["--queue-size", "80"], [], 0)
    assert f"about {budget.size_text(3 * weights)} each" in plain[0], plain
    assert f"about {budget.size_text(4 * weights)} each" in queued[0] and "momentum encoder" in queued[0], queued
