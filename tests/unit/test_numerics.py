"""NT-Xent numerics: finite and correct at small τ with fp16/bf16 inputs, for identical
views, for one sentence (no negatives: the loss is 0 by definition), for empty batches;
and a NaN loss stops fairseq's trainer before it reaches the weights.
"""

import math

import pytest
import torch

from fairseq_clear import losses

TEMPERATURES = [1.0, 0.1, 0.05, 0.01]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def reference_nt_xent(z1, z2, tau):
    """CLEAR eq. 1-2 written out in float64, term by term (no shortcuts shared with losses.py)."""
    z = torch.cat([z1, z2]).double()
    z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    m = z1.size(0)
    total = z.new_zeros(())
    for a in range(2 * m):
        b = (a + m) % (2 * m)
        sims = (z[a] @ z.t()) / tau
        others = torch.cat([sims[:a], sims[a + 1:]])
        total = total + (torch.logsumexp(others, 0) - sims[b])
    return total


def views(m, d, dtype, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    z1 = (torch.randn(m, d, generator=g) * scale).to(dtype)
    z2 = (z1.float() + 0.3 * scale * torch.randn(m, d, generator=g)).to(dtype)
    return z1.requires_grad_(), z2.requires_grad_()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("tau", TEMPERATURES)
def test_nt_xent_matches_float64_reference(tau, dtype):
    z1, z2 = views(16, 32, dtype)
    loss, correct = losses.nt_xent(z1, z2, tau)
    assert loss.dtype == torch.float32  # logits and loss in fp32 whatever the input
    assert torch.isfinite(loss)
    ref = reference_nt_xent(z1.detach(), z2.detach(), tau)
    assert loss.item() == pytest.approx(ref.item(), rel=2e-4, abs=1e-3)
    assert 0 <= int(correct) <= 32

    loss.backward()
    z1r, z2r = z1.detach().double().requires_grad_(), z2.detach().double().requires_grad_()
    reference_nt_xent(z1r, z2r, tau).backward()
    # error relative to the largest gradient entry; fp16 also flushes |g| < 6e-8 to 0
    tol = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]
    floor = {torch.float32: 1e-12, torch.float16: 1e-7, torch.bfloat16: 1e-12}[dtype]
    for got, want in ((z1.grad, z1r.grad), (z2.grad, z2r.grad)):
        assert got.dtype == dtype and torch.isfinite(got.float()).all()
        error = (got.double() - want).abs().max().item()
        assert error <= max(tol * want.abs().max().item(), floor), (error, want.abs().max().item())


def test_small_tau_is_out_of_reach_of_a_naive_exp():
    """Why log-sum-exp: e^(1/τ) at τ = 0.01 overflows fp16 (and fp32 at τ < 0.0113)."""
    assert torch.isinf(torch.exp(torch.tensor(1 / 0.01, dtype=torch.float16)))
    assert torch.isinf(torch.exp(torch.tensor(1 / 0.01, dtype=torch.float32)))
    z1, z2 = views(8, 16, torch.float16)
    loss, _ = losses.nt_xent(z1, z2, 0.005)
    assert torch.isfinite(loss)


def test_huge_vector_norms_in_fp16_stay_finite():
    """Squaring fp16 values near its maximum overflows fp16; norms are taken in fp32."""
    z1, z2 = views(6, 16, torch.float16, scale=2e4)
    with torch.no_grad():
        z1.clamp_(-6e4, 6e4)
        z2.clamp_(-6e4, 6e4)
    assert torch.isfinite(z1).all() and torch.isinf((z1 * z1).sum(-1)).any()
    loss, _ = losses.nt_xent(z1, z2, 0.01)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(z1.grad.float()).all() and torch.isfinite(z2.grad.float()).all()
    ref = reference_nt_xent(z1.detach(), z2.detach(), 0.01)
    assert loss.item() == pytest.approx(ref.item(), rel=2e-4, abs=1e-3)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
def test_zero_vector(dtype):
    """A zero embedding has no direction: the loss stays finite (it scores 0 against all).
    Its gradient is scaled by 1/eps = 1e6: finite in fp32 and bf16; in fp16 it can exceed
    65504, which is exactly the overflow fairseq's --fp16 loss scaler detects and skips."""
    z1, z2 = views(6, 16, dtype)
    with torch.no_grad():
        z2[0] = 0
    loss, _ = losses.nt_xent(z1, z2, 0.05)
    assert torch.isfinite(loss)
    ref = reference_nt_xent(z1.detach(), z2.detach(), 0.05)
    assert loss.item() == pytest.approx(ref.item(), rel=2e-4, abs=1e-3)
    loss.backward()
    assert torch.isfinite(z1.grad.float()).all()
    if dtype != torch.float16:
        assert torch.isfinite(z2.grad.float()).all()


@pytest.mark.parametrize("tau", TEMPERATURES)
def test_identical_views(tau):
    """Zero distance between the two views: positives score 1/τ, the loss matches the reference."""
    z1, _ = views(8, 16, torch.float32)
    z2 = z1.detach().clone().requires_grad_()
    loss, correct = losses.nt_xent(z1, z2, tau)
    ref = reference_nt_xent(z1.detach(), z2.detach(), tau).item()
    assert loss.item() == pytest.approx(ref, rel=1e-5, abs=1e-5)
    assert int(correct) == 16
    loss.backward()
    assert torch.isfinite(z1.grad).all()


def test_fully_collapsed_batch_gives_log_of_candidates():
    """Every view identical: each anchor sees 2M-1 equal logits, the loss is log(2M-1) each."""
    m = 5
    z = torch.ones(m, 8, requires_grad=True)
    loss, _ = losses.nt_xent(z, z, 0.01)
    assert loss.item() == pytest.approx(2 * m * math.log(2 * m - 1), rel=1e-6)
    loss.backward()
    assert torch.isfinite(z.grad).all()


@pytest.mark.parametrize("form", ["nt-xent", "simcse"])
def test_one_sentence_has_no_negatives_and_loss_zero(form):
    """Defined behaviour: with one sentence the positive is the only candidate; loss 0, no gradient."""
    z1, z2 = views(1, 16, torch.float16)
    if form == "nt-xent":
        loss, correct = losses.nt_xent(z1, z2, 0.05)
        assert int(correct) == 2
    else:
        loss, correct = losses.simcse(z1, z2, 0.05)
        assert int(correct) == 1
    assert loss.item() == 0.0
    loss.backward()
    assert z1.grad.float().abs().max() == 0 and z2.grad.float().abs().max() == 0


@pytest.mark.parametrize("form", ["nt-xent", "simcse"])
def test_no_anchors_here(form):
    """A rank (or dummy batch) with no anchors of its own: 0, not NaN, over any candidates."""
    z1, z2 = views(4, 8, torch.float32)
    rows = torch.zeros(0, dtype=torch.long)
    fn = losses.nt_xent if form == "nt-xent" else losses.simcse
    loss, correct = fn(z1, z2, 0.1, rows)
    assert loss.item() == 0.0 and int(correct) == 0
    empty1, empty2 = torch.zeros(0, 8, requires_grad=True), torch.zeros(0, 8, requires_grad=True)
    loss, _ = fn(empty1, empty2, 0.1)
    assert loss.item() == 0.0
    loss.backward()


def test_fp16_loss_scaler_turns_overflow_into_a_skipped_step():
    """fairseq's --fp16 scaler (GPU only): a NaN/inf gradient norm halves the scale and raises
    OverflowError, which the trainer turns into 'gradient overflow detected, ignoring gradient'."""
    from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler

    scaler = DynamicLossScaler(init_scale=2.0 ** 7, scale_window=2000, min_loss_scale=1e-4)
    for bad in (float("nan"), float("inf")):
        before = scaler.loss_scale
        with pytest.raises(OverflowError):
            scaler.check_overflow(bad)
        assert scaler.loss_scale == before / 2
    scaler.check_overflow(1.0)  # a finite norm passes
    scaler.loss_scale = 1e-4
    with pytest.raises(FloatingPointError, match="Minimum loss scale reached"):
        scaler.check_overflow(float("nan"))
