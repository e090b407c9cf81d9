"""The contrastive part of a batch, read: the sample contract of docs/design.md (written by the
collaters of data/contrastive_views_dataset.py, contrastive_rows_dataset.py and
multitask_dataset.py) split into anchors, positives, hard negatives and what travels with them."""

from typing import NamedTuple, Optional

import torch


class Part(NamedTuple):
    """One micro-batch's share of a contrastive problem (None where the batch has none)."""

    za: torch.Tensor  # anchors
    zp: torch.Tensor  # positives (DeCLUTR: averaged)
    zh: Optional[torch.Tensor]  # hard negatives
    signs: Optional[torch.Tensor]  # seed 004's +1/-1 per pair
    keys: Optional[torch.Tensor]  # (n, 1 + P) duplicate keys of each pair's texts
    hkeys: Optional[torch.Tensor]  # (n,) the hard negatives' keys
    ga: Optional[torch.Tensor]  # the guide's vectors of the anchors,
    gp: Optional[torch.Tensor]  # of the positives (averaged)
    gh: Optional[torch.Tensor]  # and of the hard negatives


def split_views(z, views, stand_in, guide=None):
    """A :class:`Part`: vectors of the anchors, of the (averaged) positives and of the hard
    negatives, the pairs' signs, duplicate keys and guide vectors."""
    n = views["num_anchors"]
    p = views.get("positives_per_anchor", 1)
    hard = views.get("hard_negatives", False)

    def split(x, average=True):
        if x is None:
            return None, None, None
        xa, xp = x[:n], x[n : n + n * p].view(n, p, *x.shape[1:])
        xp = xp.mean(dim=1) if average else xp  # DeCLUTR: mean of P positives
        return xa, xp, (x[n + n * p :] if hard else None)

    za, zp, zh = split(z)
    signs = views.get("pair_signs")  # seed 004's negative pairs (contrastive_pairs --negative-pairs)
    if signs is not None:
        signs = signs.to(z.device)
    keys = hkeys = None
    if views.get("source_keys") is not None:
        ka, kp, hkeys = split(views["source_keys"].to(z.device), average=False)
        keys = torch.cat([ka[:, None], kp], dim=1)  # (n, 1 + P): the pair's texts
    ga, gp, gh = split(guide)
    part = Part(za, zp, zh, signs, keys, hkeys, ga, gp, gh)
    if stand_in:  # joins the collectives, lends no views to the other ranks
        part = Part(*(x[:0] if x is not None else None for x in part))
    return part
