"""Distillation from the guide (--distill-weight): the term equals a hand computation of the KL
between the guide's and the student's in-batch similarity lists, it reaches the loss through the
criterion, and the guide gets no gradient."""

import math

import criterion_helpers as ch
import pytest
import torch

from fairseq_clear import losses


def _cos(u, v):
    return float(u @ v / (u.norm() * v.norm()))


def kl_reference(za, zp, ga, gp, tau_s, tau_t, queued=None, queued_teacher=None):
    """NT-Xent's layout written out: each of the 2M views against every other view but its partner
    (and every queued row, the student's vectors of it ``queued``, the guide's ``queued_teacher``)."""
    z, g, m = torch.cat([za, zp]), torch.cat([ga, gp]), za.size(0)
    if queued is not None:
        z, g = torch.cat([z, queued.to(z.dtype)]), torch.cat([g, queued_teacher.to(g.dtype)])
    total = 0.0
    for a in range(2 * m):
        others = [k for k in range(len(z)) if k not in (a, (a + m) % (2 * m))]
        s = [math.exp(_cos(z[a], z[k]) / tau_s) for k in others]
        t = [math.exp(_cos(g[a], g[k]) / tau_t) for k in others]
        p, q = [x / sum(s) for x in s], [x / sum(t) for x in t]
        total += sum(qi * math.log(qi / pi) for qi, pi in zip(q, p))
    return total


def test_the_term_equals_a_hand_computation():
    gen = torch.Generator().manual_seed(0)
    za, zp, ga, gp = (torch.randn(4, 6, generator=gen, dtype=torch.float64) for _ in range(4))
    m = 4
    anchors, partners = torch.arange(2 * m), torch.cat([torch.arange(m) + m, torch.arange(m)])
    exclude = torch.zeros(2 * m, 2 * m, dtype=torch.bool)
    exclude[anchors, anchors] = exclude[anchors, partners] = True
    kd = losses.distillation_kl(torch.cat([za, zp]), torch.cat([za, zp]), torch.cat([ga, gp]), torch.cat([ga, gp]),
                                0.05, 0.025, exclude)
    assert kd.item() == pytest.approx(kl_reference(za, zp, ga, gp, 0.05, 0.025), rel=1e-10)
    same = losses.distillation_kl(za, za, za, za, 0.05, 0.05)
    assert same.item() == pytest.approx(0.0, abs=1e-12)  # a student that ranks as its teacher


@pytest.fixture(scope="module")
def built(tiny_data):
    return ch.build(tiny_data, "--mlm", "off")


def test_through_the_criterion_the_guide_teaches_and_gets_no_gradient(built, plain_checkpoint):
    task, model, _ = built
    criterion = ch.criterion(built, guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                             distill_weight=2.0, distill_mse_weight=0.5, no_guide_filter=True)
    sample = ch.batch(task, range(6))
    model.zero_grad(set_to_none=True)
    logs, z = ch.forward(criterion, model, sample, seed=3)
    src = sample["contrastive"]["src_tokens"]
    g = criterion.guide.vectors(src).double()
    z = z.double()
    cfg = criterion.cfg
    expected = kl_reference(z[:6], z[6:], g[:6], g[6:], cfg.distill_temperature, cfg.distill_teacher_temperature)
    assert logs["kd_loss"].item() == pytest.approx(expected, rel=1e-4)
    mse = sum(float(((z[i] - g[i]) ** 2).mean()) for i in range(12))  # every view is an anchor (nt-xent)
    assert logs["kd_mse"].item() == pytest.approx(mse, rel=1e-4)
    assert "guide_masked" not in logs  # --no-guide-filter: the guide only teaches
    # L = λ·L_CL + 2·L_KL + 0.5·L_MSE (sample_size: the 12 anchors)
    assert logs["loss"].item() == pytest.approx(logs["cl_loss"].item() + 2 * expected + 0.5 * mse, rel=1e-4)
    guide = criterion.guide.model
    assert all(p.grad is None and not p.requires_grad for p in guide.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    assert not any(p is q for p in criterion.parameters() for q in guide.parameters())


@pytest.mark.parametrize("changes,message", [
    ({"distill_weight": 1.0}, "--distill-weight distils --guide-model, but no --guide-model was given"),
    ({"distill_temperature": 0.0}, "--distill-temperature must be in 0.0001..100, got 0.0"),
    ({"distill_mse_weight": 1.0, "cl_weight": 0.0}, "--distill-mse-weight distils --guide-model, but no"),
])
def test_distillation_without_a_teacher_is_refused_at_start_up(built, changes, message):
    from fairseq_clear.criterions.clear import ClearCriterionError

    with pytest.raises(ClearCriterionError, match=message.replace(".", r"\.")):
        ch.criterion(built, **changes)


@pytest.fixture(scope="module")
def smaller(tiny_data):
    """A student whose contrastive vectors (32) are smaller than the guide's (128)."""
    return ch.build(tiny_data, "--mlm", "off", "--projection-dim", "32")


def test_an_mse_between_vectors_of_different_sizes_is_refused_at_start_up(smaller, plain_checkpoint):
    """... when the user asks for no projection (--distill-mse-projection none)."""
    from fairseq_clear.criterions.clear import ClearCriterionError

    with pytest.raises(ClearCriterionError, match="--distill-mse-weight compares the 32-dimensional contrastive"):
        ch.criterion(smaller, guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                     distill_mse_weight=1.0, distill_mse_projection="none")


def test_an_mse_between_vectors_of_different_sizes_goes_through_a_learned_projection(smaller, plain_checkpoint):
    """EmbedDistill's linear map of the student's 32-dimensional vectors to the guide's 128: the term equals
    a hand computation through it, the map and the model are trained, the guide is not, and the map is
    part of the criterion's state (saved in fairseq's checkpoints)."""
    task, model, _ = smaller
    criterion = ch.criterion(smaller, guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                             distill_mse_weight=0.5, no_guide_filter=True)
    projection = criterion.distill_projection
    assert tuple(projection.weight.shape) == (128, 32)
    assert {"distill_projection.weight", "distill_projection.bias"} <= set(criterion.state_dict())
    sample = ch.batch(task, range(6))
    model.zero_grad(set_to_none=True)
    logs, z = ch.forward(criterion, model, sample, seed=5)
    g = criterion.guide.vectors(sample["contrastive"]["src_tokens"]).double()
    w, b = projection.weight.detach().double(), projection.bias.detach().double()
    mse = sum(float(((w @ z[i].double() + b - g[i]) ** 2).mean()) for i in range(12))  # nt-xent: 12 anchors
    assert logs["kd_mse"].item() == pytest.approx(mse, rel=1e-4)
    assert logs["loss"].item() == pytest.approx(logs["cl_loss"].item() + 0.5 * mse, rel=1e-4)
    assert projection.weight.grad is not None and projection.weight.grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    assert all(p.grad is None and not p.requires_grad for p in criterion.guide.model.parameters())


def test_with_a_queue_the_lists_hold_the_queued_rows_as_the_guide_scored_them(built, plain_checkpoint):
    task, model, _ = built
    criterion = ch.criterion(built, guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                             distill_weight=1.0, no_guide_filter=True, queue_size=4)
    first = ch.batch(task, range(40, 44))
    ch.forward(criterion, model, first)
    queued, queued_teacher = criterion.queue.vectors.clone(), criterion.queue.teacher.clone()
    torch.testing.assert_close(queued_teacher, criterion.guide.vectors(first["contrastive"]["src_tokens"][4:]))
    sample = ch.batch(task, range(50, 56))
    logs, z = ch.forward(criterion, model, sample, seed=4)
    g = criterion.guide.vectors(sample["contrastive"]["src_tokens"]).double()
    z, cfg = z.double(), criterion.cfg
    expected = kl_reference(z[:6], z[6:], g[:6], g[6:], cfg.distill_temperature, cfg.distill_teacher_temperature,
                            queued.double(), queued_teacher.double())
    assert logs["kd_loss"].item() == pytest.approx(expected, rel=1e-4)
    assert expected != pytest.approx(kl_reference(z[:6], z[6:], g[:6], g[6:], cfg.distill_temperature,
                                                  cfg.distill_teacher_temperature), rel=1e-3)


def test_the_guide_encodes_each_distinct_row_once(built, plain_checkpoint, monkeypatch):
    """SimCSE's two views of a sentence are the same ids: the guide (no dropout) encodes them once,
    and every row gets the vector it gets alone."""
    criterion = ch.criterion(built, guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                             distill_weight=1.0, no_guide_filter=True)
    task = built[0]
    src = ch.batch(task, range(5))["contrastive"]["src_tokens"][:5]
    twice = torch.cat([src, src[[3, 1]], src])  # 12 rows, 5 distinct
    model = criterion.guide.model
    rows, features = [], type(model).sentence_features
    monkeypatch.setattr(type(model), "sentence_features", lambda self, s, *a, **k: rows.append(s.size(0))
                        or features(self, s, *a, **k))
    got = criterion.guide.vectors(twice)
    assert rows == [5] and got.shape == (12, got.size(1))
    alone = torch.stack([criterion.guide.vectors(row[None])[0] for row in twice])
    torch.testing.assert_close(got, alone, rtol=1e-5, atol=1e-5)
    assert torch.equal(got[:5], got[7:])  # a row's copies: one vector


def test_a_row_longer_than_the_guides_positions_is_refused_in_one_line(built, plain_checkpoint):
    """The rows fairseq batches fit the student's positions, which can exceed the guide's (64 here):
    GuideModelError naming the guide and both lengths, not an IndexError in its positional embedding."""
    import torch

    from fairseq_clear.guide import GuideModelError

    criterion = ch.criterion(built, guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                             distill_weight=1.0, no_guide_filter=True)
    guide = criterion.guide
    assert guide.positions == 64
    fits = torch.randint(4, 50, (3, 64))
    assert torch.isfinite(guide.vectors(fits)).all()  # as many tokens as positions: read
    with pytest.raises(GuideModelError, match=r"--guide-model .*at most 64 tokens and a batch has a row of 65"):
        guide.vectors(torch.randint(4, 50, (3, 65)))


def test_with_chunks_the_guide_and_the_momentum_encoder_encode_a_chunk_at_a_time(tiny_data, plain_checkpoint,
                                                                                 monkeypatch):
    """--contrastive-chunk-size bounds the activations of every encoder a batch goes through: the
    model's (GradCache), the guide's and the momentum encoder's (no_grad, chunk by chunk); the loss is
    the one of the same batch encoded at once (no dropout: the chunks' masks are drawn apart)."""
    built = ch.build(tiny_data, "--mlm", "off", "--dropout", "0", "--attention-dropout", "0")
    task, model, _ = built
    options = dict(guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                   distill_weight=1.0, queue_size=8)
    sample = ch.batch(task, range(60, 66))  # 12 views, all distinct
    at_once = ch.criterion(built, **options)
    whole = ch.forward(at_once, model, sample, seed=5)[0]
    rows, features = [], type(model).sentence_features
    monkeypatch.setattr(type(model), "sentence_features", lambda self, s, *a, **k: rows.append(s.size(0))
                        or features(self, s, *a, **k))
    criterion = ch.criterion(built, contrastive_chunk_size=4, **options)
    model.train()
    torch.manual_seed(5)
    loss, _, chunked = criterion(model, sample)  # (ch.forward encodes the views again, whole)
    loss.backward()
    assert rows and max(rows) == 4 and sum(rows) >= 4 * 12  # model (twice: GradCache), guide, momentum
    for name in ("loss", "cl_loss", "kd_loss"):
        assert chunked[name].item() == pytest.approx(whole[name].item(), rel=1e-5)
    for name in ("vectors", "teacher"):  # what the momentum encoder and the guide queued
        torch.testing.assert_close(getattr(criterion.queue, name), getattr(at_once.queue, name))


def test_a_guide_trained_on_another_dictionary_of_the_same_size_is_refused(tiny_data, plain_checkpoint, tmp_path,
                                                                          caplog):
    """A guide saved by fairseq-train (no dict.txt beside it) is read with the training data's dict.txt; its
    checkpoint names the data it was trained on, whose dict.txt must be the same: one of the same size in
    another order would load without an error and score other tokens. Refused in one line naming both;
    a guide whose training data is not here loads, and the log says what could not be checked."""
    import shutil

    from fairseq_clear.guide import GuideModelError

    shuffled = tmp_path / "shuffled"
    shutil.copytree(tiny_data, shuffled)
    lines = (shuffled / "dict.txt").read_text().splitlines()
    (shuffled / "dict.txt").write_text("\n".join(lines[1:] + lines[:1]) + "\n")  # the same symbols, rotated
    built = ch.build(shuffled, "--mlm", "off")
    options = dict(guide_model=str(plain_checkpoint.parent), guide_checkpoint=plain_checkpoint.name,
                   distill_weight=1.0, no_guide_filter=True)
    with pytest.raises(GuideModelError, match=r"^--guide-model .*: it was trained on '.*', whose dict.txt differs "
                       r"from the training data's '.*shuffled/dict.txt' \(the same number of symbols"):
        ch.criterion(built, **options)
    # the same data under another path (a copy): the same symbols, accepted
    copy = tmp_path / "copy"
    shutil.copytree(tiny_data, copy)
    ch.criterion(ch.build(copy, "--mlm", "off"), **options)
    # a checkpoint whose training data is not on this machine: read with the data's dictionary, and said
    from fairseq_clear.guide import check_trained_dictionary

    elsewhere = tmp_path / "elsewhere.pt"
    torch.save({"cfg": {"task": {"data": str(tmp_path / "not-here")}}}, elsewhere)
    with caplog.at_level("WARNING", logger="fairseq_clear.guide"):
        check_trained_dictionary("G", str(elsewhere), str(tiny_data))
    assert any("is not on this machine, so its dictionary cannot be compared" in r.getMessage()
               for r in caplog.records)
