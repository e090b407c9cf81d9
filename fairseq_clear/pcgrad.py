"""Gradient surgery (PCGrad, Yu et al. 2020) as a plain function of flat gradients.

Seed 004 §4.2 and Table 7 combine the three task losses with the off-the-shelf PCGrad of
WeiChengTseng/Pytorch-PCGrad: each task's gradient g_i, in turn, is projected onto the normal
plane of every other task's gradient g_j it conflicts with (g_i·g_j < 0), the other tasks taken
in a random order, and the projected gradients are merged as that code's ``_project_conflicting``
merges them with its default reduction ('mean'): averaged over the entries every task's loss
reaches (the shared encoder), summed over the others (a head, a layer only some tasks use), each
task's projected gradient counting there, leaked components included:

    g_i' = g_i;  for j in shuffled(others): if g_i'·g_j < 0: g_i' -= (g_i'·g_j / ||g_j||²) g_j
    g[shared] = mean_i g_i'[shared];  g[~shared] = sum_i g_i'[~shared]

An entry is reached when autograd reaches its parameter (that code's ``p.grad is not None``), not
when its gradient is non-zero. The sum on the heads keeps each head's update the size its own loss
gives it (an average would divide it by the number of tasks). ``reduction="sum"`` sums everywhere
(that code's 'sum' branch, which its ``if self._reduction:`` never reaches: any reduction averages
the shared entries there).

The order is drawn from the ``generator`` given (the task keys it by seed and update, so a
resumed run projects as the uninterrupted one did); with two tasks there is no order to draw.
"""

from typing import List, Optional

import torch


def project_conflicting(grads: List[torch.Tensor], generator: Optional[torch.Generator] = None,
                        reduction: str = "mean", reached: Optional[List[torch.Tensor]] = None) -> torch.Tensor:
    """The PCGrad update of the flat per-task gradients ``grads`` (each of the same shape);
    ``reached``: per task, a bool tensor of that shape, True where its loss reaches the parameter
    (None: every task reaches every entry)."""
    if not grads:
        raise ValueError("PCGrad needs at least one gradient")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    originals = [g.double() for g in grads]
    projected = []
    for i, g in enumerate(originals):
        g = g.clone()
        others = [j for j in range(len(originals)) if j != i]
        if len(others) > 1:
            order = torch.randperm(len(others), generator=generator).tolist()
            others = [others[k] for k in order]
        for j in others:
            other = originals[j]
            dot = torch.dot(g, other)
            if dot < 0:
                g = g - dot / other.dot(other).clamp_min(1e-20) * other
        projected.append(g)
    out = torch.stack(projected).sum(0)
    if reduction == "mean":
        shared = None if reached is None else torch.stack(list(reached)).all(0)
        out = out / len(projected) if shared is None else torch.where(shared, out / len(projected), out)
    return out.to(grads[0].dtype)
