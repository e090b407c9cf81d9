"""False negatives: which in-batch candidates are not negatives of an anchor, as boolean masks.

The masks have the layout of :mod:`fairseq_clear.losses`' ``negative_mask`` argument (one row per
anchor this rank owns, one column per candidate of the whole, gathered, batch):

* ``loss_form="nt-xent"``: rows ``rows`` then ``rows + M``; columns the M first views, then the M
  second views (CLEAR eq. 1-2);
* ``loss_form="simcse"``: rows ``rows``; columns the M positives, then the M hard negatives.

Two rules, each a pure function of plain tensors:

* :func:`duplicate_mask` (exact duplicates): every row of the batch carries the key of the token
  sequence it was made from (:func:`token_key`: the sentence before augmentation, or the row
  itself for pairs and DeCLUTR's spans). The views of another pair that shares a key with the
  anchor's pair (the same sentence twice, the same question in two pairs, two NLI pairs sharing a
  premise) are not negatives; a hard negative is not one when its key is one of the anchor pair's.
* :func:`guide_mask` (GISTEmbed, Solatorio 2024; sentence-transformers' ``GISTEmbedLoss``): a
  frozen guide model's cosine similarities; a candidate the guide scores above the anchor's
  positive (``absolute``: ``sim > sim_pos - margin``; ``relative``: ``sim > sim_pos - |sim_pos|·margin``,
  GISTEmbedLoss's form and the miner's: ``sim_pos·(1 - margin)`` would raise the bar when the
  guide's positive cosine is negative) is not a negative.

The anchor's own positive is never masked (the losses keep it whatever the mask says).
"""

import hashlib
from typing import Optional, Tuple

import numpy as np
import torch

from .errors import FairseqClearError


class FalseNegativeError(FairseqClearError, ValueError):
    """A false-negative rule cannot apply to this task's batches; the message names the option."""


def token_key(tokens) -> int:
    """A 63-bit key of a token sequence (the same on every rank and in every process, unlike
    Python's salted ``hash``); equal sequences have equal keys."""
    a = np.ascontiguousarray(np.asarray(tokens, dtype=np.int64))
    return int.from_bytes(hashlib.blake2b(a.tobytes(), digest_size=8).digest(), "little") >> 1


def _shared(keys_a: torch.Tensor, keys_b: torch.Tensor) -> torch.Tensor:
    """(A, B) bool: whether row a of ``keys_a`` (A, k) and row b of ``keys_b`` (B, l) share a key."""
    out = torch.zeros((keys_a.size(0), keys_b.size(0)), dtype=torch.bool, device=keys_a.device)
    for i in range(keys_a.size(1)):
        for j in range(keys_b.size(1)):
            out |= keys_a[:, i, None] == keys_b[None, :, j]
    return out


def _layout(pair_mask: torch.Tensor, hard_mask: Optional[torch.Tensor], rows: torch.Tensor,
            loss_form: str) -> torch.Tensor:
    """The (local anchors x candidates) mask of ``loss_form`` from a pair-level mask (|rows|, M)
    and a hard-negative one (|rows|, M)."""
    if loss_form == "nt-xent":
        both = torch.cat([pair_mask, pair_mask], dim=1)  # the pair's two views
        return torch.cat([both, both], dim=0)  # both directions
    if hard_mask is None:
        return pair_mask
    return torch.cat([pair_mask, hard_mask], dim=1)


def duplicate_mask(pair_keys: torch.Tensor, rows: torch.Tensor, loss_form: str,
                   hard_keys: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Exact duplicates (module docstring).

    ``pair_keys``: (M, k) the keys of each pair's anchor and positives (all ranks); ``hard_keys``:
    (M,) the hard negatives' keys, or None; ``rows``: the anchors this rank owns.
    """
    mine = pair_keys[rows]
    pair = _shared(mine, pair_keys)
    pair[torch.arange(len(rows), device=pair.device), rows] = False  # the anchor's own pair
    hard = None if hard_keys is None else _shared(mine, hard_keys[:, None])
    return _layout(pair, hard, rows, loss_form)


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    dtype = torch.promote_types(a.dtype, torch.float32)
    a = torch.nn.functional.normalize(a.to(dtype), dim=-1, eps=1e-12)
    b = torch.nn.functional.normalize(b.to(dtype), dim=-1, eps=1e-12)
    return a @ b.t()


def guide_mask(guide: Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]], rows: torch.Tensor,
               loss_form: str, margin: float = 0.0, strategy: str = "absolute") -> torch.Tensor:
    """GIST's filter (module docstring) from the guide's vectors ``guide`` = (anchors (M, d),
    positives (M, d), hard negatives (M, d) or None), all ranks'."""
    ga, gp, gh = guide
    if loss_form == "nt-xent":
        views = torch.cat([ga, gp])
        m = ga.size(0)
        anchors = torch.cat([rows, rows + m])
        partners = torch.cat([rows + m, rows])
        sims = _cos(views[anchors], views)
        positive = sims.gather(1, partners[:, None])
        own = [anchors, partners]  # itself and its positive are never negatives
    else:
        candidates = gp if gh is None else torch.cat([gp, gh])
        sims = _cos(ga[rows], candidates)
        positive = sims.gather(1, rows[:, None])
        own = [rows]
    if strategy == "absolute":
        mask = sims > positive - margin
    elif strategy == "relative":
        mask = sims > positive - positive.abs() * margin
    else:
        raise ValueError(f"unknown guide margin strategy {strategy!r}")
    index = torch.arange(mask.size(0), device=mask.device)
    for columns in own:
        mask[index, columns] = False
    return mask


def counters(cfg, guide: bool) -> list:
    """The names of the per-update counts the rules in force log (dup_masked; guide_masked when a
    guide model is loaded)."""
    return (["dup_masked"] if cfg.mask_duplicates else []) + (["guide_masked"] if guide else [])


def false_negatives(cfg, rows, keys, hkeys, guide):
    """(the union of the masks of the rules the options turn on, or None; {rule: candidates masked})
    for the anchors ``rows``; ``guide``: the guide's (anchors, positives, hard negatives) vectors,
    None when there is no guide or outside training."""
    mask, counts = None, {k: 0 for k in counters(cfg, guide is not None)}
    if cfg.mask_duplicates:
        if keys is None:
            raise FalseNegativeError("--mask-duplicates: this task's batches carry no source_keys (the "
                                    "plugin's clear, declutr and contrastive_pairs tasks do)")
        mask = duplicate_mask(keys, rows, cfg.loss_form, hkeys)
        counts["dup_masked"] = int(mask.sum())
    if guide is not None and guide[0] is not None:
        gist = guide_mask(guide, rows, cfg.loss_form, cfg.guide_margin, cfg.guide_margin_strategy)
        counts["guide_masked"] = int(gist.sum())
        mask = gist if mask is None else mask | gist
    return mask, counts
