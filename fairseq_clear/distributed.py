"""Negatives from every rank: an all-gather that keeps gradients flowing.

The CLEAR paper trains on 256 GPUs with 8,192 sentences per update; its
contrastive task is defined over the whole minibatch, so each rank must see the
views of all others. :func:`gather_with_grad` concatenates a tensor across the
data-parallel group. Its backward all-reduces the incoming gradient and keeps
the local slice: every rank's loss then sends gradient to the views it
borrowed from other ranks, and the parameter gradients equal those of one
process holding the whole batch (a plain all-gather would silently drop
those terms). Ranks may hold different numbers of rows, including zero.
"""

from typing import List, Tuple

import torch
import torch.distributed as dist


def _group_info(group) -> Tuple[int, int]:
    return dist.get_world_size(group=group), dist.get_rank(group=group)


def all_gather_counts(counts: List[int], group, device) -> torch.Tensor:
    """Gather a few integers from every rank: returns a (world_size x len(counts)) tensor."""
    world_size, _ = _group_info(group)
    local = torch.tensor(counts, dtype=torch.long, device=device)
    out = [torch.zeros_like(local) for _ in range(world_size)]
    dist.all_gather(out, local, group=group)
    return torch.stack(out)


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, sizes: List[int], group):
        world_size, rank = _group_info(group)
        ctx.sizes, ctx.rank, ctx.group = sizes, rank, group
        max_size = max(sizes)
        padded = x.new_zeros((max_size,) + x.shape[1:])
        padded[: x.size(0)] = x
        parts = [torch.empty_like(padded) for _ in range(world_size)]
        dist.all_gather(parts, padded.contiguous(), group=group)
        return torch.cat([p[:n] for p, n in zip(parts, sizes)], dim=0)

    @staticmethod
    def backward(ctx, grad):
        sizes, rank = ctx.sizes, ctx.rank
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)
        start = sum(sizes[:rank])
        return grad[start : start + sizes[rank]], None, None


def gather_with_grad(x: torch.Tensor, sizes: List[int], group) -> torch.Tensor:
    """Concatenate ``x`` (``sizes[rank]`` rows here) over the ranks of ``group``, differentiably.

    ``sizes`` must be the row counts of all ranks (see :func:`all_gather_counts`).
    """
    return _GatherWithGrad.apply(x, sizes, group)


def gather(x: torch.Tensor, sizes: List[int], group) -> torch.Tensor:
    """Concatenate ``x`` over the ranks of ``group`` without a graph (keys, a frozen guide's vectors)."""
    world_size, _ = _group_info(group)
    x = x.detach()
    padded = x.new_zeros((max(sizes),) + x.shape[1:])
    padded[: x.size(0)] = x
    parts = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(parts, padded.contiguous(), group=group)
    return torch.cat([p[:n] for p, n in zip(parts, sizes)], dim=0)
