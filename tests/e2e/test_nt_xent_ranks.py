"""NT-Xent across two gloo ranks equals one process holding the whole batch (the gather keeps gradients)."""

import os
import socket
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from fairseq_clear import distributed, losses

from helpers import EXCLUSIVE

pytestmark = EXCLUSIVE


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
