"""NT-Xent (CLEAR eq. 1-2) against a literal per-pair implementation, and its gradient."""

import math

import pytest
import torch

from fairseq_clear import losses


def eq1_reference(z1, z2, tau):
    """CLEAR eq. 1-2 written out pair by pair, with the sum over 2N anchors (eq. 2)."""
    z = torch.cat([z1, z2]).double()
    n2 = z.size(0)
    n = n2 // 2

    def sim(u, v):
        return float(u @ v / (u.norm() * v.norm()))

    total, correct = 0.0, 0
    for i in range(n2):
        j = (i + n) % n2
        denom = sum(math.exp(sim(z[i], z[k]) / tau) for k in range(n2) if k != i)
        total += -math.log(math.exp(sim(z[i], z[j]) / tau) / denom)
        best = max((k for k in range(n2) if k != i), key=lambda k: sim(z[i], z[k]))
        correct += best == j
    return total, correct


@pytest.mark.parametrize("n,d,tau", [(2, 3, 0.5), (5, 8, 0.1), (9, 16, 0.05)])
def test_nt_xent_equals_the_per_pair_definition(n, d, tau):
    g = torch.Generator().manual_seed(n * 100 + d)
    z1, z2 = torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)
    loss, correct = losses.nt_xent(z1, z2, tau)
    ref, ref_correct = eq1_reference(z1, z2, tau)
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    assert int(correct) == ref_correct


def test_nt_xent_rows_select_a_subset_of_anchors():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    full, _ = losses.nt_xent(z1, z2, 0.2)
    part_a, _ = losses.nt_xent(z1, z2, 0.2, torch.arange(0, 2))
    part_b, _ = losses.nt_xent(z1, z2, 0.2, torch.arange(2, 6))
    assert (part_a + part_b).item() == pytest.approx(full.item(), rel=1e-6)


def test_nt_xent_gradient_passes_gradcheck():
    g = torch.Generator().manual_seed(1)
    z1 = torch.randn(4, 5, generator=g, dtype=torch.double, requires_grad=True)
    z2 = torch.randn(4, 5, generator=g, dtype=torch.double, requires_grad=True)

    def f(a, b):
        # the loss normalises in fp32; re-implement the same math in fp64 for gradcheck
        z = torch.nn.functional.normalize(torch.cat([a, b]), dim=-1)
        m = a.size(0)
        idx = torch.arange(m)
        anchors, targets = torch.cat([idx, idx + m]), torch.cat([idx + m, idx])
        logits = (z[anchors] @ z.t() / 0.3).masked_fill(
            torch.eye(2 * m, dtype=torch.bool)[anchors], float("-inf")
        )
        return torch.nn.functional.cross_entropy(logits, targets, reduction="sum")

    assert torch.autograd.gradcheck(f, (z1, z2))
    # and the library function has the same gradient as that fp64 formulation
    loss, _ = losses.nt_xent(z1.float(), z2.float(), 0.3)
    ga = torch.autograd.grad(loss, (z1,), retain_graph=False)[0]
    gb = torch.autograd.grad(f(z1, z2), (z1,))[0]
    assert torch.allclose(ga.double(), gb, atol=1e-5)


def test_one_sentence_has_no_negatives_and_zero_loss():
    z1, z2 = torch.randn(1, 8, requires_grad=True), torch.randn(1, 8)
    loss, correct = losses.nt_xent(z1, z2, 0.1)
    assert loss.item() == 0.0 and int(correct) == 2
    loss.backward()
    assert torch.count_nonzero(z1.grad) == 0


# ---- across ranks ----------------------------------------------------------------
