"""Pooling of encoder features into sentence vectors, and the names of the model's heads.

Kept apart from the model class so that the inference loop, the hub and the
CLIs can name poolings and heads without importing the model (no import cycle).
"""

import contextlib
import logging
from typing import Callable, NamedTuple

import torch

logger = logging.getLogger(__name__)


def _mean(features, keep):
    return (features * keep).sum(1) / keep.sum(1).clamp(min=1)


def _max(features, keep):
    return features.masked_fill(keep == 0, float("-inf")).max(dim=1).values


def _weighted_mean(features, keep):
    # weight = position (1, 2, ...): right-padded rows, so the first token weighs 1 as in sentence-transformers
    weights = keep * torch.arange(1, features.size(1) + 1, device=features.device, dtype=keep.dtype).view(1, -1, 1)
    return (features * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


def _first_token(features, keep):
    # the first pooled position: <s>, or the first after a prompt left out (sentence-transformers' argmax)
    first = keep.squeeze(-1).argmax(1)
    return features[torch.arange(features.size(0), device=features.device), first]


def _last_token(features, keep):
    # the last pooled position (right-padded: </s>); none pooled gives zeros, as sentence-transformers
    held, back = keep.squeeze(-1).flip(1).max(1)
    last = features.size(1) - 1 - back
    return features[torch.arange(features.size(0), device=features.device), last] * held.unsqueeze(-1)


class PoolingMode(NamedTuple):
    """One pooling: its sentence-transformers ``Pooling`` mode (the export writes it, the import reads it
    back), the function (``features`` B x T x C, ``keep`` B x T x 1: 1 for a token, 0 for padding), and
    the same in the model card's transformers-alone snippet (``hidden``, ``mask``: B x T x 1 float)."""

    st_mode: str
    fn: Callable
    snippet: str


#: the one table of poolings: the model, embed(), the import, the export and the model card read it
POOLINGS = {
    "cls": PoolingMode("cls", _first_token, "hidden[:, 0]  # [CLS] / <s>"),
    "mean": PoolingMode("mean", _mean, "(hidden * mask).sum(1) / mask.sum(1)"),
    "max": PoolingMode("max", _max, "hidden.masked_fill(mask == 0, float('-inf')).max(dim=1).values"),
    "mean_sqrt_len_tokens": PoolingMode("mean_sqrt_len_tokens",
                                    lambda features, keep: (features * keep).sum(1) / keep.sum(1).clamp(min=1).sqrt(),
                                    "(hidden * mask).sum(1) / mask.sum(1).sqrt()"),
    "weightedmean": PoolingMode("weightedmean", _weighted_mean,
                            "(hidden * mask * torch.arange(1, hidden.size(1) + 1).view(1, -1, 1)).sum(1) / "
                            "(mask * torch.arange(1, hidden.size(1) + 1).view(1, -1, 1)).sum(1)"),
    "lasttoken": PoolingMode("lasttoken", _last_token,
                         "hidden[torch.arange(hidden.size(0)), mask.squeeze(-1).sum(1).long() - 1]  # </s> / [SEP]"),
}
#: the names the options take: a live view of the table (a pooling added to it is accepted everywhere)
POOLING_CHOICES = POOLINGS.keys()
#: what ``head`` selects: the model's sentence representation (CLSR's e applied when
#: the model has it), the pooled encoder output only, or the projection head g's output
HEAD_CHOICES = ("representation", "pooled", "projection")
#: --pretrained-kind: what clear-import-hf imported (the recipes pick continued-training values by it)
PRETRAINED_KINDS = ("encoder", "sentence-embedding")
#: sentence-transformers' similarity_fn_name values for one vector per sentence (--sentence-similarity)
SIMILARITY_FUNCTIONS = ("cosine", "dot", "euclidean", "manhattan")


def check_pooling(pooling: str):
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling '{pooling}', choose from {', '.join(POOLINGS)}")


def from_st_mode(st_mode: str):
    """Our pooling for a sentence-transformers Pooling mode; None when we have none."""
    return next((name for name, p in POOLINGS.items() if p.st_mode == st_mode), None)


def check_head_name(head: str):
    if head not in HEAD_CHOICES:
        raise ValueError(f"unknown head '{head}', choose from {HEAD_CHOICES}")


def pool(features: torch.Tensor, padding_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Sentence vectors from ``features`` (B x T x C, right-padded) by ``POOLINGS[pooling]``.

    ``cls`` takes the ``<s>`` position; the others pool over every non-padding position, ``<s>``
    and ``</s>`` included, as sentence-transformers does (so exported models give the same vectors).
    Positions marked in ``padding_mask`` are left out, a prompt's too (``models.inference.pooling_skip``):
    ``cls`` then takes the first position pooled, as sentence-transformers does.
    """
    check_pooling(pooling)
    return POOLINGS[pooling].fn(features, (~padding_mask).unsqueeze(-1).type_as(features))


def pooling_source(kind) -> str:
    """Where an import's --pretrained-pooling comes from (``kind``: its --pretrained-kind), for the logs."""
    if kind == "sentence-embedding":
        return "a sentence-embedding model, recorded by clear-import-hf"
    # clear-import-hf's rule for a folder with no pooling config (export/from_hf.py NO_POOLING_CONFIG)
    return ("an encoder, recorded by clear-import-hf: sentence-transformers' default, mean, when its folder "
            "has no pooling config")


def own_pooling(args):
    """An imported model keeps the pooling clear-import-hf recorded (a sentence-embedding model's own;
    an encoder's, mean, as sentence-transformers pools it) unless --sentence-pooling says otherwise."""
    own = getattr(args, "pretrained_pooling", None)
    if not own:
        return
    given = getattr(args, "sentence_pooling", None)
    kind = getattr(args, "pretrained_kind", None)
    if given is None:
        from omegaconf import OmegaConf, open_dict

        with open_dict(args) if OmegaConf.is_config(args) else contextlib.nullcontext():
            args.sentence_pooling = own
        logger.info("model: --sentence-pooling %s: the starting model's own pooling (%s); pass "
                    "--sentence-pooling to change it", own, pooling_source(kind))
    elif given != own and kind == "sentence-embedding":
        logger.warning("model: --sentence-pooling %s replaces the starting model's own pooling (%s): its "
                       "vectors change meaning; leave --sentence-pooling out to keep the model's", given, own)
    elif given != own:
        logger.info("model: --sentence-pooling %s instead of the imported encoder's %s (%s)", given, own,
                    pooling_source(kind))
