"""Pooling of encoder features into sentence vectors, and the names of the model's heads.

Kept apart from the model class so that the inference loop, the hub and the
CLIs can name poolings and heads without importing the model (no import cycle).
"""

import contextlib
import logging

import torch

logger = logging.getLogger(__name__)

POOLING_CHOICES = ("cls", "mean")
#: what ``head`` selects: the model's sentence representation (CLSR's e applied when
#: the model has it), the pooled encoder output only, or the projection head g's output
HEAD_CHOICES = ("representation", "pooled", "projection")
#: --pretrained-kind: what clear-import-hf imported (the recipes pick continued-training values by it)
PRETRAINED_KINDS = ("encoder", "sentence-embedding")


def check_pooling(pooling: str):
    if pooling not in POOLING_CHOICES:
        raise ValueError(f"unknown pooling '{pooling}', choose from {POOLING_CHOICES}")


def check_head_name(head: str):
    if head not in HEAD_CHOICES:
        raise ValueError(f"unknown head '{head}', choose from {HEAD_CHOICES}")


def pool(features: torch.Tensor, padding_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Sentence vectors from ``features`` (B x T x C).

    ``cls`` takes the ``<s>`` position; ``mean`` averages over every
    non-padding position, ``<s>`` and ``</s>`` included (as sentence-transformers
    does, so that exported models give the same vectors).
    """
    if pooling == "cls":
        return features[:, 0]
    if pooling == "mean":
        keep = (~padding_mask).unsqueeze(-1).type_as(features)
        return (features * keep).sum(1) / keep.sum(1).clamp(min=1)
    raise ValueError(f"unknown pooling '{pooling}', choose from {POOLING_CHOICES}")


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
