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
* ``hardness_mode`` / ``hardness_strength`` (sentence-transformers' ``MultipleNegativesRankingLoss``
  hardness weighting, Lan et al. 2025 eq. 5): ``α·stopgrad(cos)`` is added to the logit of each
  negative the mode names (``in_batch_negatives``: other pairs' candidates; ``hard_negatives``:
  the anchor's own hard negative; ``all_negatives``: both), after the division by τ, so harder
  negatives weigh more in the denominator; the positive's logit is never changed.
* ``queue`` / ``queue_mask`` (ESimCSE's momentum queue, :mod:`fairseq_clear.momentum_queue`):
  (Q, d) vectors of past batches appended as extra negative columns of every anchor (constants:
  no gradient reaches them), each prefix normalised as the batch's, weighted as in-batch
  negatives by hardness weighting; ``queue_mask`` (anchors x Q, the anchors' row order) True
  leaves a queued vector out of that anchor's denominator (a duplicate).
"""

import math
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from .errors import FairseqClearError


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


class MatryoshkaOptionError(FairseqClearError, ValueError):
    """--matryoshka-dims / --matryoshka-weights that cannot work; the message names the option."""


def _numbers(text: str, kind, flag: str) -> list:
    try:
        return [kind(x) for x in str(text or "").replace(" ", "").split(",") if x]
    except ValueError:
        raise MatryoshkaOptionError(f"{flag} must be comma-separated numbers, got {text!r}") from None


def matryoshka(cfg):
    """(dims, weights) of --matryoshka-dims/--matryoshka-weights, largest first; (None, None) when off."""
    dims = _numbers(cfg.matryoshka_dims, int, "--matryoshka-dims")
    weights = _numbers(cfg.matryoshka_weights, float, "--matryoshka-weights")
    if not dims:
        if weights:
            raise MatryoshkaOptionError("--matryoshka-weights needs --matryoshka-dims")
        return None, None
    if min(dims) < 1 or len(set(dims)) != len(dims):
        raise MatryoshkaOptionError(f"--matryoshka-dims must be distinct sizes >= 1, got {cfg.matryoshka_dims!r}")
    if not weights:
        weights = [1.0] * len(dims)
    if len(weights) != len(dims):
        raise MatryoshkaOptionError(f"--matryoshka-weights gives {len(weights)} weights for {len(dims)} "
                                    f"--matryoshka-dims sizes")
    if not all(0 <= w < math.inf for w in weights) or not any(w > 0 for w in weights):
        raise MatryoshkaOptionError(f"--matryoshka-weights must be finite, >= 0 and not all 0, got "
                                    f"{cfg.matryoshka_weights!r}")
    order = sorted(range(len(dims)), key=lambda i: -dims[i])
    return [dims[i] for i in order], [weights[i] for i in order]


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


#: sentence-transformers' ``hardness_mode`` values (None: off), and those that weigh in-batch negatives
HARDNESS_MODES = ("in_batch_negatives", "hard_negatives", "all_negatives")
WEIGHS_IN_BATCH = ("in_batch_negatives", "all_negatives")


def _hardness(cos: torch.Tensor, strength: float, weighted: torch.Tensor) -> torch.Tensor:
    """``strength·stopgrad(cos)`` where ``weighted`` is True, 0 elsewhere (added to the logits)."""
    return (strength * cos.detach()).masked_fill(~weighted, 0.0)


def _queued(logits, anchors, queue, d, temperature, hardness, queue_mask):
    """``logits`` with the queue's columns appended (anchors: the normalised prefixes of the anchors)."""
    if queue is None or queue.size(0) == 0:
        return logits
    cos = anchors @ _normalize(queue[:, :d].to(anchors.device)).t().to(anchors.dtype)
    extra = cos / temperature
    mode, strength = hardness
    if strength > 0 and mode in WEIGHS_IN_BATCH:  # queued vectors are other sentences
        extra = extra + strength * cos.detach()
    return torch.cat([logits, _masked(extra, queue_mask)], dim=1)


def nt_xent(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float,
    rows: Optional[torch.Tensor] = None,
    signs: Optional[torch.Tensor] = None,
    negative_mask: Optional[torch.Tensor] = None,
    dims: Optional[Sequence[int]] = None,
    dim_weights: Optional[Sequence[float]] = None,
    hardness_mode: Optional[str] = None,
    hardness_strength: float = 0.0,
    queue: Optional[torch.Tensor] = None,
    queue_mask: Optional[torch.Tensor] = None,
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
    (2·|rows|, 2M), rows in the order ``rows``, then ``rows + M`` (module docstring). Hardness
    weighting: every other view is an in-batch negative, so ``in_batch_negatives`` and
    ``all_negatives`` weigh all 2M-2 of them and ``hard_negatives`` (there are none) nothing.
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
    hard = hardness_strength > 0 and hardness_mode in WEIGHS_IN_BATCH
    if hard:
        negative = torch.ones_like(self_mask)
        negative[torch.arange(len(anchors), device=z.device), targets] = False
    loss, correct = None, None
    for d, w in _prefixes(dims, dim_weights, z.size(1)):
        zd = _normalize(z[:, :d])
        cos = zd[anchors] @ zd.t()
        logits = cos / temperature
        if hard:
            logits = logits + _hardness(cos, hardness_strength, negative)
        logits = logits.masked_fill(self_mask, float("-inf"))
        logits = _queued(logits, zd[anchors], queue, d, temperature, (hardness_mode, hardness_strength), queue_mask)
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
    hardness_mode: Optional[str] = None,
    hardness_strength: float = 0.0,
    queue: Optional[torch.Tensor] = None,
    queue_mask: Optional[torch.Tensor] = None,
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
    negatives), positives' columns first. Hardness weighting (module docstring): in-batch
    negatives are the columns of other anchors' positives and hard negatives.
    """
    m = z1.size(0)
    if rows is None:
        rows = torch.arange(m, device=z1.device)
    candidates = z2 if z3 is None else torch.cat([z2, z3], dim=0)
    if negative_mask is not None:
        negative_mask = negative_mask.to(z1.device).clone()
        negative_mask[torch.arange(len(rows), device=z1.device), rows] = False  # the positive stays
    weighted = None
    if hardness_strength > 0 and hardness_mode in HARDNESS_MODES:
        own = torch.zeros((len(rows), candidates.size(0)), dtype=torch.bool, device=z1.device)
        own[torch.arange(len(rows), device=z1.device), rows] = True  # the positive
        if z3 is not None:
            own[torch.arange(len(rows), device=z1.device), m + rows] = True  # its hard negative
        weighted = ~own if hardness_mode in WEIGHS_IN_BATCH else torch.zeros_like(own)
        if z3 is not None and hardness_mode != "in_batch_negatives":  # the anchor's own hard negative too
            weighted[torch.arange(len(rows), device=z1.device), m + rows] = True
    loss, correct = None, None
    for d, w in _prefixes(dims, dim_weights, z1.size(1)):
        anchors = _normalize(z1[rows][:, :d])
        cos = anchors @ _normalize(candidates[:, :d]).t()
        logits = cos / temperature
        if weighted is not None:
            logits = logits + _hardness(cos, hardness_strength, weighted)
        if z3 is not None and hard_negative_weight != 0.0:
            weight = torch.zeros_like(logits)
            weight[torch.arange(len(rows), device=z1.device), m + rows] = hard_negative_weight
            logits = logits + weight
        logits = _masked(logits, negative_mask)
        logits = _queued(logits, anchors, queue, d, temperature, (hardness_mode, hardness_strength), queue_mask)
        term = _weighted_sum(F.cross_entropy(logits, rows, reduction="none"), signs)
        loss = term * w if loss is None else loss + term * w
        if correct is None:
            positive = slice(None) if signs is None else signs > 0
            correct = _count_correct(logits[positive], rows[positive])
    return loss, correct


def distillation_kl(
    student_anchors: torch.Tensor,
    student_candidates: torch.Tensor,
    teacher_anchors: torch.Tensor,
    teacher_candidates: torch.Tensor,
    temperature: float,
    teacher_temperature: float,
    exclude: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Listwise distillation of the in-batch similarities (RankCSE's ListNet, Liu et al. 2023;
    ConGen's KL, Limkonchotiwat et al. 2022), summed over the anchors:

        Σ_i KL(softmax(t_i / τ_t) ‖ softmax(s_i / τ_s))

    with ``s_ij``, ``t_ij`` the cosine similarities of anchor i and candidate j under the student's
    and the teacher's vectors. ``exclude`` (bool, anchors x candidates): columns left out of anchor
    i's lists (the anchor itself and its positive, as RankCSE leaves out the diagonal). The teacher
    is a constant (no gradient reaches it). The gradient equals that of ListNet's cross-entropy.
    """
    s = _normalize(student_anchors) @ _normalize(student_candidates).t() / temperature
    with torch.no_grad():
        t = _normalize(teacher_anchors) @ _normalize(teacher_candidates).t() / teacher_temperature
    if exclude is not None:
        exclude = exclude.to(s.device)
        s, t = s.masked_fill(exclude, float("-inf")), t.masked_fill(exclude, float("-inf"))
    log_p, log_q = F.log_softmax(s, dim=-1), F.log_softmax(t.to(s.dtype), dim=-1)
    if exclude is not None:  # q = 0 there: 0·(-inf - -inf) would be nan
        log_p, log_q = log_p.masked_fill(exclude, 0.0), log_q.masked_fill(exclude, 0.0)
    return (log_q.exp() * (log_q - log_p)).sum()


def embedding_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Embedding-level distillation (DistilCSE's MSE; sentence-transformers' ``MSELoss``): the squared
    error of each row's vector against the teacher's, averaged over the dimensions and summed over
    the rows. The teacher is a constant."""
    student = student.to(torch.promote_types(student.dtype, torch.float32))
    return (student - teacher.detach().to(student.dtype)).pow(2).mean(dim=-1).sum()
