"""sentence-transformers' Dense modules as part of a model's sentence embedding (``--sentence-dense``).

An imported sentence-transformers model with Dense modules (LaBSE: Pooling -> Dense -> Normalize) keeps
them here, in sentence-transformers' order: pool -> Dense... -> (CLSR's e, the projection head g) ->
Normalize. Their sizes and activations are one model option, a word such as ``256:tanh,128:linear``
(``:nobias`` for a layer without bias), so a checkpoint's config says what is built before its weights
are read (``checkpoint_sizes`` bounds it). Kept apart from the model class: the import, the export and
the checkpoint checks read the table and the word without building a model.
"""

import re
from typing import List, NamedTuple

import torch
import torch.nn as nn

from ..errors import FairseqClearError

#: the one table of Dense activations, both directions: our name (fairseq's, for the projection head and
#: CLSR's e) -> the torch module; sentence-transformers writes it as its class path (:func:`st_name`).
#: Nothing outside this table is ever built from a file: a config names one of these or is refused.
DENSE_ACTIVATIONS = {"tanh": nn.Tanh, "linear": nn.Identity, "relu": nn.ReLU, "gelu": nn.GELU,
                     "sigmoid": nn.Sigmoid}
#: the most Dense layers and the widest one a checkpoint's --sentence-dense may ask for
MAX_LAYERS, MAX_WIDTH = 16, 65536


class SentenceDenseError(FairseqClearError, ValueError):
    """A --sentence-dense word (or a Dense config) that cannot build the layers; the message names it."""


class DenseSpec(NamedTuple):
    out_features: int
    activation: str
    bias: bool = True


def st_name(activation: str) -> str:
    """The activation as sentence-transformers writes it in 2_Dense/config.json: torch.nn.modules.activation.Tanh."""
    cls = DENSE_ACTIVATIONS[activation]
    return f"{cls.__module__}.{cls.__name__}"


def from_st_name(name):
    """Our name of a sentence-transformers activation class path (also ``torch.nn.Tanh``); None if not in the table."""
    if not isinstance(name, str):
        return None
    return next((ours for ours, cls in DENSE_ACTIVATIONS.items()
                 if name in (st_name(ours), f"torch.nn.{cls.__name__}")), None)


_LAYER = re.compile(r"([0-9]{1,6}):([a-z]+)(:nobias)?")


def parse(word) -> List[DenseSpec]:
    """The layers of a --sentence-dense word ([] for none), checked: widths 1..MAX_WIDTH, activations of the table."""
    if not word:
        return []
    layers = []
    for item in str(word).split(","):
        m = _LAYER.fullmatch(item)
        if m is None or m.group(2) not in DENSE_ACTIVATIONS or not 1 <= int(m.group(1)) <= MAX_WIDTH:
            raise SentenceDenseError(f"--sentence-dense {str(word)[:80]!r}: layer {item[:40]!r} is not OUT:ACTIVATION"
                                     f"[:nobias] with OUT in 1..{MAX_WIDTH} and ACTIVATION one of "
                                     f"{', '.join(DENSE_ACTIVATIONS)}")
        layers.append(DenseSpec(int(m.group(1)), m.group(2), m.group(3) is None))
    if len(layers) > MAX_LAYERS:
        raise SentenceDenseError(f"--sentence-dense: {len(layers)} layers, at most {MAX_LAYERS}")
    return layers


def word(layers) -> str:
    """The --sentence-dense word of ``layers`` (DenseSpec)."""
    return ",".join(f"{s.out_features}:{s.activation}" + ("" if s.bias else ":nobias") for s in layers)


def shapes(layers, width: int) -> dict:
    """``{parameter name under sentence_dense.: shape}`` of ``layers`` over sentence vectors of ``width``."""
    out = {}
    for i, s in enumerate(layers):
        out[f"layers.{i}.linear.weight"] = (s.out_features, width)
        if s.bias:
            out[f"layers.{i}.linear.bias"] = (s.out_features,)
        width = s.out_features
    return out


class DenseLayer(nn.Module):
    """sentence-transformers' Dense: activation(linear(x)), the same parameter names (``linear.*``)."""

    def __init__(self, in_features: int, spec: DenseSpec):
        super().__init__()
        self.activation = spec.activation
        self.linear = nn.Linear(in_features, spec.out_features, bias=spec.bias)
        self.activation_function = DENSE_ACTIVATIONS[spec.activation]()

    def forward(self, x):
        return self.activation_function(self.linear(x))


class SentenceDense(nn.Module):
    """The Dense layers after the pooling."""

    def __init__(self, width: int, layers):
        super().__init__()
        self.layers = nn.ModuleList()
        for spec in layers:
            self.layers.append(DenseLayer(width, spec))
            width = spec.out_features
        self.out_features = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.type_as(self.layers[0].linear.weight)
        for layer in self.layers:
            x = layer(x)
        return x
