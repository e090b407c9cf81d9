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

Two optional arguments of every loss, both plain data so the functions stay pure:

* ``negative_mask`` (bool, one row per anchor, one column per candidate): True removes that
  candidate from that anchor's denominator (a false negative: a duplicate, or one a guide model
  ranks above the positive; :mod:`fairseq_clear.negatives` builds it). The anchor's own positive
  is never removed.
* ``dims`` / ``dim_weights`` (Matryoshka, Kusupati et al. 2022; sentence-transformers'
  ``MatryoshkaLoss``): the loss is ``sum_k w_k * loss(z[:, :d_k])``, each prefix normalised on
  its own; the ranking count is that of the largest ``d_k``.
"""

from typing import Optional, Sequence, Tuple

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


def _prefixes(dims: Optional[Sequence[int]], weights: Optional[Sequence[float]], full: int):
    """[(d, w)] of a Matryoshka loss (the full dimension, weight 1, without one), largest first."""
    if not dims:
        return [(full, 1.0)]
    weights = [1.0] * len(dims) if weights is None else list(weights)
    if len(weights) != len(dims):
        raise ValueError(f"{len(dims)} Matryoshka dims but {len(weights)} weights")
    if max(dims) > full or min(dims) < 1:
        raise ValueError(f"Matryoshka dims {list(dims)} must be within 1..{full}, the vectors' size")
    return sorted(zip((int(d) for d in dims), (float(w) for w in weights)), key=lambda t: -t[0])


def _masked(logits: torch.Tensor, negative_mask: Optional[torch.Tensor]) -> torch.Tensor:
    if negative_mask is None:
        return logits
    return logits.masked_fill(negative_mask.to(logits.device), float("-inf"))


def nt_xent(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float,
    rows: Optional[torch.Tensor] = None,
    signs: Optional[torch.Tensor] = None,
    negative_mask: Optional[torch.Tensor] = None,
    dims: Optional[Sequence[int]] = None,
    dim_weights: Optional[Sequence[float]] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """NT-Xent, CLEAR eq. 1-2 (= SimCLR's loss, DeCLUTR eq. 2, CLSR eq. 1).

    ``z1[i]`` and ``z2[i]`` (M x d each) are the two views of sentence ``i``.
    The 2M views form the candidate set; for the view at position ``a`` the
    positive is its partner and the other 2M-2 views are negatives:

        l(a, b) = -log exp(sim(z_a, z_b)/τ) / Σ_{k≠a} exp(sim(z_a, z_k)/τ)

    Both directions count, so each sentence contributes l(i, i+M) and
    l(i+M, i). Returns the sum of l over the 2·|rows| anchors of ``rows``.
    With M = 1 the positive is the only candidate and the loss is 0. ``signs`` (one per row of
    ``rows``): each pair's term is multiplied by its sign (see :func:`simcse`). ``negative_mask``:
    (2·|rows|, 2M), rows in the order ``rows``, then ``rows + M`` (module docstring).
    """
    m = z1.size(0)
    if rows is None:
        rows = torch.arange(m, device=z1.device)
    z = torch.cat([z1, z2], dim=0)
    anchors = torch.cat([rows, rows + m])
    targets = torch.cat([rows + m, rows])
    self_mask = torch.zeros((len(anchors), 2 * m), dtype=torch.bool, device=z.device)
    self_mask[torch.arange(len(anchors), device=z.device), anchors] = True
    if negative_mask is not None:
        keep = torch.zeros_like(self_mask)
        keep[torch.arange(len(anchors), device=z.device), targets] = True
        self_mask = self_mask | (negative_mask.to(z.device) & ~keep)
    weights = None if signs is None else torch.cat([signs, signs])
    loss, correct = None, None
    for d, w in _prefixes(dims, dim_weights, z.size(1)):
        zd = _normalize(z[:, :d])
        logits = (zd[anchors] @ zd.t() / temperature).masked_fill(self_mask, float("-inf"))
        term = _weighted_sum(F.cross_entropy(logits, targets, reduction="none"), weights)
        loss = term * w if loss is None else loss + term * w
        if correct is None:
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
    negative_mask: Optional[torch.Tensor] = None,
    dims: Optional[Sequence[int]] = None,
    dim_weights: Optional[Sequence[float]] = None,
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
    (second value) counts the +1 rows only. ``negative_mask``: (|rows|, M or 2M with hard
    negatives), positives' columns first.
    """
    m = z1.size(0)
    if rows is None:
        rows = torch.arange(m, device=z1.device)
    candidates = z2 if z3 is None else torch.cat([z2, z3], dim=0)
    if negative_mask is not None:
        negative_mask = negative_mask.to(z1.device).clone()
        negative_mask[torch.arange(len(rows), device=z1.device), rows] = False  # the positive stays
    loss, correct = None, None
    for d, w in _prefixes(dims, dim_weights, z1.size(1)):
        logits = _normalize(z1[rows][:, :d]) @ _normalize(candidates[:, :d]).t() / temperature
        if z3 is not None and hard_negative_weight != 0.0:
            weight = torch.zeros_like(logits)
            weight[torch.arange(len(rows), device=z1.device), m + rows] = hard_negative_weight
            logits = logits + weight
        logits = _masked(logits, negative_mask)
        term = _weighted_sum(F.cross_entropy(logits, rows, reduction="none"), signs)
        loss = term * w if loss is None else loss + term * w
        if correct is None:
            positive = slice(None) if signs is None else signs > 0
            correct = _count_correct(logits[positive], rows[positive])
    return loss, correct
