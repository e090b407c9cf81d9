"""NT-Xent (CLEAR eq. 1-2) against a literal per-pair implementation, and its gradient."""

import math
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fairseq_clear import distributed, losses


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
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_worker(rank, world, port, z1_all, z2_all, sizes, tau, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    start = sum(sizes[:rank])
    z1 = z1_all[start : start + sizes[rank]].clone().requires_grad_(True)
    z2 = z2_all[start : start + sizes[rank]].clone().requires_grad_(True)
    group = dist.group.WORLD
    g1 = distributed.gather_with_grad(z1, sizes, group)
    g2 = distributed.gather_with_grad(z2, sizes, group)
    rows = torch.arange(start, start + sizes[rank])
    loss, _ = losses.nt_xent(g1, g2, tau, rows)
    loss.backward()
    out[rank] = (loss.item(), z1.grad.clone(), z2.grad.clone())
    dist.destroy_process_group()


@pytest.mark.parametrize("sizes", [[3, 3], [4, 1], [5, 0]])
def test_gather_across_two_gloo_ranks_equals_one_process(sizes):
    """Same loss and the same per-view gradients as one process holding the whole batch."""
    n, d, tau = sum(sizes), 6, 0.1
    g = torch.Generator().manual_seed(sum(sizes) * 7 + sizes[0])
    z1_all, z2_all = torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)

    ref1, ref2 = z1_all.clone().requires_grad_(True), z2_all.clone().requires_grad_(True)
    ref_loss, _ = losses.nt_xent(ref1, ref2, tau)
    ref_loss.backward()

    manager = mp.Manager()
    out = manager.dict()
    mp.start_processes(
        _rank_worker,
        args=(2, _free_port(), z1_all, z2_all, sizes, tau, out),
        nprocs=2,
        join=True,
        start_method="spawn",
    )
    total = out[0][0] + out[1][0]
    assert total == pytest.approx(ref_loss.item(), rel=1e-5)
    grad1 = torch.cat([out[0][1], out[1][1]])
    grad2 = torch.cat([out[0][2], out[1][2]])
    assert torch.allclose(grad1, ref1.grad, atol=1e-5)
    assert torch.allclose(grad2, ref2.grad, atol=1e-5)
