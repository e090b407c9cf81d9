"""Hardness-weighted negatives (--hardness-mode/--hardness-strength) equal sentence-transformers'
MultipleNegativesRankingLoss(hardness_mode=...) on the same vectors (float64), also per Matryoshka
prefix and through GradCache's re-encoding backward."""

import criterion_helpers as ch
import pytest
import torch

from fairseq_clear import gradcache, losses

st_losses = pytest.importorskip("sentence_transformers.losses")

TAU = 0.05
MODES = ("in_batch_negatives", "hard_negatives", "all_negatives")


def _vectors(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _st(columns, mode, strength):
    """sentence-transformers' mean loss over the anchors (columns: anchors, positives[, negatives])."""
    loss = st_losses.MultipleNegativesRankingLoss(None, scale=1 / TAU, hardness_mode=mode,
                                                  hardness_strength=strength)
    return loss.compute_loss_from_embeddings(list(columns), None)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("with_hard", [False, True])
def test_simcse_loss_equals_multiple_negatives_ranking_loss(mode, with_hard):
    m = 6
    z1, z2, z3 = (_vectors(m, 8, seed=s) for s in (1, 2, 3))
    hard = z3 if with_hard else None
    ours, _ = losses.simcse(z1, z2, TAU, z3=hard, hardness_mode=mode, hardness_strength=9.0)
    theirs = _st([z1, z2] + ([z3] if with_hard else []), mode, 9.0)
    assert ours.item() / m == pytest.approx(theirs.item(), rel=1e-12)
    plain, _ = losses.simcse(z1, z2, TAU, z3=hard)
    if mode != "hard_negatives" or with_hard:  # the weighting changes the loss where it applies
        assert abs(ours.item() - plain.item()) > 1e-3


@pytest.mark.parametrize("mode", ["in_batch_negatives", "all_negatives"])
def test_nt_xent_anchor_equals_an_n_tuple_of_its_other_views(mode):
    """NT-Xent's anchor a against its partner and the 2M-2 other views is sentence-transformers' loss
    of one (anchor, positive, negative_1, ...) n-tuple with every negative weighted (all_negatives)."""
    m = 4
    z1, z2 = _vectors(m, 6, seed=4), _vectors(m, 6, seed=5)
    ours, _ = losses.nt_xent(z1, z2, TAU, hardness_mode=mode, hardness_strength=5.0)
    z = torch.cat([z1, z2])
    expected = 0.0
    for a in range(2 * m):
        partner = (a + m) % (2 * m)
        others = [z[k:k + 1] for k in range(2 * m) if k not in (a, partner)]
        expected += _st([z[a:a + 1], z[partner:partner + 1]] + others, "all_negatives", 5.0).item()
    assert ours.item() == pytest.approx(expected, rel=1e-12)
    assert abs(ours.item() - losses.nt_xent(z1, z2, TAU)[0].item()) > 1e-3


def test_matryoshka_prefixes_are_weighted_sentence_transformers_losses():
    """MatryoshkaLoss(MultipleNegativesRankingLoss): the weighted sum of the loss of each prefix."""
    m, dims, weights = 5, [8, 4], [1.0, 0.5]
    z1, z2, z3 = (_vectors(m, 8, seed=s) for s in (6, 7, 8))
    ours, _ = losses.simcse(z1, z2, TAU, z3=z3, dims=dims, dim_weights=weights, hardness_mode="all_negatives",
                            hardness_strength=9.0)
    theirs = sum(w * _st([z[:, :d] for z in (z1, z2, z3)], "all_negatives", 9.0).item()
                 for d, w in zip(dims, weights))
    assert ours.item() / m == pytest.approx(theirs, rel=1e-12)


def test_the_weight_is_not_differentiated():
    """stopgrad: the gradient is that of the plain loss with the weighted logits' softmax, i.e. the
    penalty's own derivative (α·∂cos) is absent; checked against the loss with the weight as a constant."""
    m = 4
    z1, z2 = _vectors(m, 6, seed=9).requires_grad_(), _vectors(m, 6, seed=10)
    loss, _ = losses.simcse(z1, z2, TAU, hardness_mode="in_batch_negatives", hardness_strength=9.0)
    (grad,) = torch.autograd.grad(loss, z1)
    u1, u2 = torch.nn.functional.normalize(z1, dim=-1), torch.nn.functional.normalize(z2, dim=-1)
    constant = 9.0 * (u1 @ u2.t()).detach() * (1 - torch.eye(m, dtype=torch.float64))
    reference = torch.nn.functional.cross_entropy(u1 @ u2.t() / TAU + constant, torch.arange(m), reduction="sum")
    (expected,) = torch.autograd.grad(reference, z1)
    torch.testing.assert_close(grad, expected, rtol=1e-10, atol=1e-12)


def test_gradcache_gives_the_gradient_of_the_whole_batch():
    """The loss is a function of the full vectors: GradCache's chunked re-encoding backward gives the
    same parameter gradient as encoding every row with its graph."""
    table = torch.nn.Embedding(20, 6, dtype=torch.float64)
    tokens = torch.randint(0, 20, (8, 3), generator=torch.Generator().manual_seed(11))
    encode = lambda src: table(src).mean(1)  # noqa: E731

    def gradient(chunk):
        table.zero_grad()
        z = gradcache.cached_encode(encode, tokens, chunk, table.parameters())
        loss, _ = losses.nt_xent(z[:4], z[4:], TAU, hardness_mode="in_batch_negatives", hardness_strength=9.0)
        loss.backward()
        return table.weight.grad.clone()

    torch.testing.assert_close(gradient(3), gradient(0), rtol=1e-10, atol=1e-12)


# ---- the options, through the task and criterion fairseq-train builds ----------------------------

@pytest.fixture(scope="module")
def built(tiny_data):
    return ch.build(tiny_data)


def test_the_criterion_weighs_the_negatives_it_is_asked_to(built):
    task, model, _ = built
    criterion = ch.criterion(built, hardness_mode="in_batch_negatives", hardness_strength=9.0)
    sample = ch.batch(task, range(6))
    model.eval()  # no dropout: the vectors below are the criterion's
    with torch.no_grad():
        _, _, logs = criterion(model, sample)
        z = model(sample["contrastive"]["src_tokens"], contrastive=True)[0]
    tau = criterion.cfg.temperature
    expected, _ = losses.nt_xent(z[:6], z[6:], tau, hardness_mode="in_batch_negatives", hardness_strength=9.0)
    plain, _ = losses.nt_xent(z[:6], z[6:], tau)
    assert logs["cl_loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert abs(expected.item() - plain.item()) > 1e-3


@pytest.mark.parametrize("changes,message", [
    ({"hardness_mode": "in_batch_negatives"}, "--hardness-mode in_batch_negatives needs --hardness-strength > 0"),
    ({"hardness_strength": 9.0}, "--hardness-strength 9.0 needs a --hardness-mode"),
    ({"hardness_mode": "hard_negatives", "hardness_strength": 5.0},
     "--hardness-mode hard_negatives weighs the anchors' own hard negatives"),
    ({"hardness_mode": "all_negatives", "hardness_strength": float("nan")}, "--hardness-strength must be in 0..100"),
])
def test_a_weighting_that_would_change_nothing_is_refused_at_start_up(built, changes, message):
    from fairseq_clear.criterions.clear import ClearCriterionError

    with pytest.raises(ClearCriterionError, match=message.replace(".", r"\.").replace("+", r"\+")):
        ch.criterion(built, **changes)
