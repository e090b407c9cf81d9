"""Contrastive losses, as plain functions of embedding tensors.

All similarities are computed in fp32 from L2-normalised vectors (cosine
similarity), and every loss goes through ``cross_entropy``, i.e. a
log-sum-exp, so that small temperatures do not overflow even when the model
runs in fp16/bf16.

Each function takes the *global* embeddings of a batch (all ranks, see
:mod:`fairseq_clear.distributed`) and the positions ``rows`` of the anchors
this process owns, and returns ``(loss summed over those anchors, number of
anchors whose positive ranks first)``. With a single process ``rows`` is every
anchor.
"""

from typing import Optional, Tuple

import torch
import torch.nn.functional as F


def _normalize(x: torch.Tensor) -> torch.Tensor:
    # at least fp32 (fp16/bf16 vectors are promoted), never narrower than the input
    return F.normalize(x.to(torch.promote_types(x.dtype, torch.float32)), dim=-1, eps=1e-6)


def _count_correct(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    # an empty batch (a rank's dummy batch with --gather-negatives off) has nothing to rank
    if logits.numel() == 0:
        return targets.new_zeros(())
    return (logits.argmax(dim=-1) == targets).sum()


def _weighted_sum(terms: torch.Tensor, weights: Optional[torch.Tensor]) -> torch.Tensor:
    if weights is None:
        return terms.sum()
    return (terms * weights.to(terms.dtype)).sum()


def nt_xent(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float,
    rows: Optional[torch.Tensor] = None,
    signs: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """NT-Xent, CLEAR eq. 1-2 (= SimCLR's loss, DeCLUTR eq. 2, CLSR eq. 1).

    ``z1[i]`` and ``z2[i]`` (M x d each) are the two views of sentence ``i``.
    The 2M views form the candidate set; for the view at position ``a`` the
    positive is its partner and the other 2M-2 views are negatives:

        l(a, b) = -log exp(sim(z_a, z_b)/τ) / Σ_{k≠a} exp(sim(z_a, z_k)/τ)

    Both directions count, so each sentence contributes l(i, i+M) and
    l(i+M, i). Returns the sum of l over the 2·|rows| anchors of ``rows``.
    With M = 1 the positive is the only candidate and the loss is 0. ``signs`` (one per row of
    ``rows``): each pair's term is multiplied by its sign (see :func:`simcse`).
    """
    m = z1.size(0)
    if rows is None:
        rows = torch.arange(m, device=z1.device)
    z = _normalize(torch.cat([z1, z2], dim=0))
    anchors = torch.cat([rows, rows + m])
    targets = torch.cat([rows + m, rows])
    logits = z[anchors] @ z.t() / temperature
    self_mask = torch.zeros_like(logits, dtype=torch.bool)
    self_mask[torch.arange(len(anchors), device=z.device), anchors] = True
    logits = logits.masked_fill(self_mask, float("-inf"))
    loss = _weighted_sum(F.cross_entropy(logits, targets, reduction="none"),
                         None if signs is None else torch.cat([signs, signs]))
    correct = _count_correct(logits, targets)
    return loss, correct


def simcse(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float,
    rows: Optional[torch.Tensor] = None,
    z3: Optional[torch.Tensor] = None,
    hard_negative_weight: float = 0.0,
    signs: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """SimCSE's loss (Gao et al. 2021; seed 004 eq. 1), one direction.

    Anchor ``z1[i]`` is scored against every positive ``z2[j]`` and, when given,
    every hard negative ``z3[j]``:

        l_i = -log e^{sim(h_i,h_i+)/τ} / Σ_j (e^{sim(h_i,h_j+)/τ} + e^{sim(h_i,h_j-)/τ + w·1[i=j]})

    ``w`` (``hard_negative_weight``) is SimCSE's log-weight, added to the
    anchor's own hard negative only, as in SimCSE's code; 0 by default.

    ``signs`` (one per row of ``rows``, +1 or -1): l_i is multiplied by its sign, so a pair
    with sign -1 (seed 004 §4.1: a non-paraphrase pair, "whose contrastive loss is maximised")
    is pushed apart by the same term that pulls a +1 pair together. The ranking count
    (second value) counts the +1 rows only.
    """
    m = z1.size(0)
    if rows is None:
        rows = torch.arange(m, device=z1.device)
    anchors = _normalize(z1[rows])
    candidates = _normalize(z2)
    if z3 is not None:
        candidates = torch.cat([candidates, _normalize(z3)], dim=0)
    logits = anchors @ candidates.t() / temperature
    if z3 is not None and hard_negative_weight != 0.0:
        weight = torch.zeros_like(logits)
        weight[torch.arange(len(rows), device=z1.device), m + rows] = hard_negative_weight
        logits = logits + weight
    loss = _weighted_sum(F.cross_entropy(logits, rows, reduction="none"), signs)
    if signs is None:
        return loss, _count_correct(logits, rows)
    positive = signs > 0
    return loss, _count_correct(logits[positive], rows[positive])
