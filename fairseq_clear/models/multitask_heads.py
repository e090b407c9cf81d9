"""Seed 004's prediction heads (§4.2, §5.3, Table 3) for the three tasks on one encoder.

Each head is a 2-layer MLP with dropout at each linear layer (seed: hidden 768, dropout 0.3)
over the sentence representation ([CLS] in the seed), laid out as fairseq's
``RobertaClassificationHead`` (``dense`` then ``out_proj``), so that they live in
``model.classification_heads`` under their task's name and fairseq's own checkpoint code
(``RobertaModel.upgrade_state_dict_named``) saves, loads and checks them like any named head:

* ``sentiment``: dropout → dense → activation → dropout → out_proj = class logits;
* ``paraphrase``: the same MLP (out_proj: hidden → hidden) transforms each sentence, then a
  bilinear function of the two transformed vectors is the paraphrase logit;
* ``sts``: the same MLP transforms each sentence; the cosine of the two is the similarity.

``--head-sharing``: ``first-layer`` (the seed's final model: paraphrase and STS share
``dense``), ``none`` (all different), ``all`` (paraphrase and STS share the whole MLP; the
bilinear weights stay paraphrase's). A shared layer is one module, so it holds one set of
parameters (the state dict names it under both heads, with the same values).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq import utils

from ..errors import FairseqClearError

#: the three tasks, in the seed's order (Tables 1-9: sentiment, paraphrase, STS)
TASK_NAMES = ("sentiment", "paraphrase", "sts")
PAIR_TASKS = ("paraphrase", "sts")
SHARING_CHOICES = ("first-layer", "none", "all")


class HeadConfigError(FairseqClearError, ValueError):
    """A head option is invalid; the message names it."""


class MLPHead(nn.Module):
    """dropout → dense → activation → dropout → out_proj (fairseq's classification head, on a
    pooled vector); ``dense``/``out_proj`` may be modules shared with another head."""

    def __init__(self, dense: nn.Linear, out_proj: nn.Linear, activation_fn: str, dropout: float):
        super().__init__()
        self.dense = dense
        self.out_proj = out_proj
        self.activation_fn = utils.get_activation_fn(activation_fn)
        self.dropout = nn.Dropout(p=dropout)

    def transform(self, x):
        x = self.dropout(x)
        x = self.activation_fn(self.dense(x))
        return self.out_proj(self.dropout(x))

    def forward(self, x):
        return self.transform(x)


class SentimentHead(MLPHead):
    """Class logits of one sentence."""


class ParaphraseHead(MLPHead):
    """logit = t(a)ᵀ W t(b) + c: a bilinear function of the two transformed sentences."""

    def __init__(self, dense, out_proj, activation_fn, dropout):
        super().__init__(dense, out_proj, activation_fn, dropout)
        dim = out_proj.out_features
        self.bilinear = nn.Bilinear(dim, dim, 1)

    def forward(self, a, b):
        return self.bilinear(self.transform(a), self.transform(b)).squeeze(-1)


class StsHead(MLPHead):
    """cos(t(a), t(b)): the similarity of the two transformed sentences, in [-1, 1]."""

    def forward(self, a, b):
        ta, tb = self.transform(a), self.transform(b)
        return F.cosine_similarity(ta.float(), tb.float(), dim=-1, eps=1e-8)


def build_heads(input_dim: int, hidden_dim: int, num_classes: int, dropout: float,
                sharing: str = "first-layer", activation_fn: str = "tanh", tasks=TASK_NAMES) -> dict:
    """The heads of ``tasks`` (name → module), with the sharing of ``sharing``."""
    if sharing not in SHARING_CHOICES:
        raise HeadConfigError(f"--head-sharing must be one of {', '.join(SHARING_CHOICES)}, got '{sharing}'")
    if hidden_dim < 1:
        raise HeadConfigError(f"--head-hidden-dim must be >= 1, got {hidden_dim}")
    if not 0.0 <= dropout < 1.0:
        raise HeadConfigError(f"--head-dropout must be in [0, 1), got {dropout}")
    heads = {}
    if "sentiment" in tasks:
        if num_classes < 2:
            raise HeadConfigError(f"the sentiment head needs at least 2 classes, got {num_classes}")
        heads["sentiment"] = SentimentHead(
            nn.Linear(input_dim, hidden_dim), nn.Linear(hidden_dim, num_classes), activation_fn, dropout)
    para_dense, para_out = nn.Linear(input_dim, hidden_dim), nn.Linear(hidden_dim, hidden_dim)
    if "paraphrase" in tasks:
        heads["paraphrase"] = ParaphraseHead(para_dense, para_out, activation_fn, dropout)
    if "sts" in tasks:
        dense = para_dense if sharing in ("first-layer", "all") else nn.Linear(input_dim, hidden_dim)
        out_proj = para_out if sharing == "all" else nn.Linear(hidden_dim, hidden_dim)
        heads["sts"] = StsHead(dense, out_proj, activation_fn, dropout)
    return heads


def apply_head(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A head on pooled vectors: one sentence per row (sentiment), or a pair task's rows laid out
    as the B first sentences then the B second ones."""
    if isinstance(head, (ParaphraseHead, StsHead)):
        if x.size(0) % 2:
            raise ValueError(f"a pair head needs an even number of rows (B first sentences, then B second), got {x.size(0)}")
        b = x.size(0) // 2
        return head(x[:b], x[b:])
    return head(x)
