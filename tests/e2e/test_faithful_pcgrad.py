"""PCGrad equals WeiChengTseng/Pytorch-PCGrad (the code seed 004 took off the shelf) on every
parameter: on the entries every task reaches, the mean of the projected gradients; on the others
(a head, a layer two of three tasks share), their SUM, as the reference's
``merged_grad[~shared] = torch.stack([g[~shared] for g in pc_grad]).sum(dim=0)``.

The reference is re-derived here from its ``pc_backward`` (``_pack_grad``: one backward per
objective, ``p.grad is None`` marks an unreached parameter; ``_project_conflicting``: each g_i,
in place, against every original gradient in a shuffled order, its own included; the merge with
its default reduction 'mean'). Its order is ``random.shuffle``: the project's keyed order must be
one of the orders the reference can draw, so the check takes every one of them. Through the task's
``train_step``: tests/e2e/test_multitask.py (on that module's data)."""

import itertools

import pytest
import torch

from fairseq_clear.pcgrad import project_conflicting


def reference_pack(losses, params):
    """The reference's ``_pack_grad``: (flat gradients, flat has-gradient masks) of each loss."""
    grads, has_grads = [], []
    for loss in losses:  # _pack_grad / _retrieve_grad
        for p in params:
            p.grad = None
        loss.backward(retain_graph=True)
        grads.append(torch.cat([(p.grad.clone() if p.grad is not None else torch.zeros_like(p)).flatten()
                                for p in params]))
        has_grads.append(torch.cat([(torch.ones_like(p) if p.grad is not None else torch.zeros_like(p)).flatten()
                                    for p in params]))
    for p in params:
        p.grad = None
    return grads, has_grads


def reference_merge(grads, has_grads, orders):
    """The reference's ``_project_conflicting`` with reduction='mean' (its default), ``orders[i]``
    the shuffled list of task indices task i's loop visits."""
    return reference_reduce([reference_project(grads, i, orders[i]) for i in range(len(grads))], has_grads)


def reference_project(grads, i, order):
    """Its loop for one task: a copy of g_i projected, in place, against the original gradients."""
    g_i = grads[i].clone()
    for j in order:
        g_j = grads[j]
        g_i_g_j = torch.dot(g_i, g_j)
        if g_i_g_j < 0:
            g_i -= g_i_g_j * g_j / (g_j.norm() ** 2)
    return g_i


def reference_reduce(pc_grad, has_grads):
    """Its merge: the mean where every task has a gradient, the sum elsewhere."""
    shared = torch.stack(has_grads).prod(0).bool()
    merged = torch.zeros_like(pc_grad[0])
    merged[shared] = torch.stack([g[shared] for g in pc_grad]).mean(dim=0)
    merged[~shared] = torch.stack([g[~shared] for g in pc_grad]).sum(dim=0)
    return merged


def every_reference_order(n):
    """Every draw of the reference's shuffles (each task's loop visits all n gradients, its own included)."""
    return itertools.product(list(itertools.permutations(range(n))), repeat=n)


class ThreeTaskNet(torch.nn.Module):
    """A trunk all three tasks use, a layer tasks 1 and 2 share (seed 004's paraphrase/STS first
    layer), a head per task, and a parameter no task reaches."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Linear(4, 6)
        self.pair_layer = torch.nn.Linear(6, 5)
        self.heads = torch.nn.ModuleList([torch.nn.Linear(6, 3), torch.nn.Linear(5, 1), torch.nn.Linear(5, 2)])
        self.unused = torch.nn.Parameter(torch.randn(3))

    def losses(self, x, y):
        h = torch.tanh(self.trunk(x))
        pair = torch.tanh(self.pair_layer(h))
        return [torch.nn.functional.cross_entropy(self.heads[0](h), y),
                (self.heads[1](pair).squeeze(-1) - y.double()).pow(2).mean(),
                -self.heads[2](pair).log_softmax(-1)[:, 1].mean()]


def _flat(grads, params):
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])


@pytest.mark.parametrize("seed", [0, 5, 10])
def test_merged_gradient_equals_the_reference_on_shared_two_task_and_one_task_parameters(seed):
    torch.manual_seed(seed)
    net = ThreeTaskNet().double()
    x, y = torch.randn(8, 4, dtype=torch.float64), torch.randint(0, 3, (8,))
    params = list(net.parameters())
    losses = net.losses(x, y)
    per_task = [torch.autograd.grad(v, params, retain_graph=True, allow_unused=True) for v in losses]
    flat = [_flat(g, params) for g in per_task]
    reached = [torch.cat([torch.full((p.numel(),), g is not None) for g, p in zip(grads, params)])
               for grads in per_task]
    assert any(a.dot(b) < 0 for i, a in enumerate(flat) for b in flat[i + 1:]), "no conflict: nothing projected"
    got = project_conflicting(flat, torch.Generator().manual_seed(seed), reached=reached)

    grads, has_grads = reference_pack(losses, params)
    gap = min(float((got - reference_merge(grads, has_grads, orders)).abs().max())
              for orders in every_reference_order(3))
    assert gap < 1e-12, gap
    # the two-task layer and the heads carry the sum: the old average (x 1/3 there) differs
    offsets = dict(zip([n for n, _ in net.named_parameters()], itertools.accumulate([0] + [p.numel() for p in params])))
    entries = {n: slice(offsets[n], offsets[n] + p.numel()) for n, p in net.named_parameters()}
    mean = torch.stack(flat).mean(0)
    for name in ("pair_layer.weight", "heads.0.weight", "heads.2.weight"):
        assert not torch.allclose(got[entries[name]], mean[entries[name]]), name
    assert got[entries["unused"]].abs().max() == 0  # the parameter no task reaches gets nothing
