"""DeCLUTR's span sampling (Giorgi et al. 2021, §3.1.1) as pure numpy functions.

From a document of ``n`` tokens we sample ``A`` anchor spans and, per anchor,
``P`` positive spans:

* lengths ``ℓ = ⌊p·(ℓmax − ℓmin) + ℓmin⌋`` with ``p_anchor ~ Beta(4, 2)``
  (skewed towards long spans) and ``p_positive ~ Beta(2, 4)`` (short spans);
* an anchor starts uniformly in ``[0, n − ℓ_anchor]``;
* a positive starts uniformly in ``[start − ℓ_pos, end]`` (clipped to the
  document), so it may overlap the anchor, be adjacent to it or be subsumed by it;
* the anchors of one document are at least ``ℓmax`` tokens apart (the gap
  between the end of one and the start of the next).

DeCLUTR's code enforces the spacing by cutting the document into blocks of
``ℓmax`` tokens and never using two neighbouring blocks. Here the anchors are
placed uniformly over *all* placements that keep the spacing (the same
"stars and bars" trick as :func:`fairseq_clear.augmentations.disjoint_span_starts`),
which for ``A = 1`` is exactly the paper's uniform start and for any ``A``
always succeeds when ``n ≥ Σℓ + (A−1)·ℓmax``; the default minimum document
length ``2·A·ℓmax`` (DeCLUTR's README) guarantees that.

Positions here are in the tokens of the binarized corpus (sentencepiece
pieces); DeCLUTR counts whitespace tokens and lets the model's tokenizer
truncate to 512 pieces.
"""

from dataclasses import dataclass
from typing import Tuple

import numpy as np
from .errors import FairseqClearError


class SpanSamplingError(FairseqClearError, ValueError):
    """A span-sampling option is invalid, or a document is too short; the message names the option."""


def parse_beta(spec: str, option: str) -> Tuple[float, float]:
    """``"4,2"`` -> ``(4.0, 2.0)``; both parameters must be positive."""
    try:
        a, b = (float(x) for x in spec.split(","))
    except ValueError:
        raise SpanSamplingError(f"--{option} must be 'alpha,beta', e.g. '4,2'; got '{spec}'") from None
    if not (a > 0 and b > 0):
        raise SpanSamplingError(f"--{option}: both Beta parameters must be > 0, got '{spec}'")
    return a, b


@dataclass
class SpanSamplingParams:
    """A, P, ℓmin, ℓmax and the two Beta distributions; defaults are DeCLUTR's (§3.1.1, §4.1)."""

    num_anchors: int = 2
    num_positives: int = 2
    min_length: int = 32
    max_length: int = 512
    anchor_beta: Tuple[float, float] = (4.0, 2.0)
    positive_beta: Tuple[float, float] = (2.0, 4.0)
    min_document_tokens: int = 0

    @property
    def required_tokens(self) -> int:
        """Shortest document sampled from: ``--min-document-tokens``, or 2·A·ℓmax (DeCLUTR's README)."""
        return self.min_document_tokens or 2 * self.num_anchors * self.max_length

    @property
    def feasible_tokens(self) -> int:
        """Shortest document that always fits A anchors of length ≤ ℓmax, ℓmax apart."""
        return (2 * self.num_anchors - 1) * self.max_length

    def validate(self):
        if self.num_anchors < 1:
            raise SpanSamplingError(f"--num-anchors must be >= 1, got {self.num_anchors}")
        if self.num_positives < 1:
            raise SpanSamplingError(f"--num-positives must be >= 1, got {self.num_positives}")
        if self.min_length < 1:
            raise SpanSamplingError(f"--min-span-length must be >= 1, got {self.min_length}")
        if self.max_length < self.min_length:
            raise SpanSamplingError(
                f"--max-span-length ({self.max_length}) must be >= --min-span-length "
                f"({self.min_length})"
            )
        if self.min_document_tokens and self.min_document_tokens < self.feasible_tokens:
            raise SpanSamplingError(
                f"--min-document-tokens {self.min_document_tokens} is too small: {self.num_anchors} "
                f"anchors of up to {self.max_length} tokens, {self.max_length} apart, need "
                f"{self.feasible_tokens} (0 = DeCLUTR's 2·A·ℓmax = "
                f"{2 * self.num_anchors * self.max_length})"
            )


def span_lengths(p: np.ndarray, min_length: int, max_length: int) -> np.ndarray:
    """``⌊p·(ℓmax − ℓmin) + ℓmin⌋`` (DeCLUTR eq. in §3.1.1)."""
    return np.floor(p * (max_length - min_length) + min_length).astype(np.int64)


def place_anchors(n: int, lengths: np.ndarray, gap: int, rng: np.random.Generator) -> np.ndarray:
    """Start positions of anchors with these ``lengths`` in ``[0, n)``, at least ``gap`` apart.

    Uniform over every placement (in a random left-to-right order) that keeps
    the spacing. Returns the starts in the order of ``lengths``.
    """
    a = len(lengths)
    slack = n - int(lengths.sum()) - (a - 1) * gap
    if slack < 0:
        raise SpanSamplingError(
            f"a document of {n} tokens cannot hold anchors of {lengths.tolist()} tokens "
            f"{gap} apart"
        )
    order = rng.permutation(a)
    # a sorted multiset of A offsets in [0, slack]: A distinct sorted values of
    # range(slack + A), minus 0..A-1 (uniform over all multisets)
    offsets = np.sort(rng.choice(slack + a, size=a, replace=False)) - np.arange(a)
    placed = np.concatenate([[0], np.cumsum(lengths[order] + gap)[:-1]])
    starts = np.empty(a, dtype=np.int64)
    starts[order] = offsets + placed
    return starts


def sample_anchors_and_positives(n: int, params: SpanSamplingParams, rng: np.random.Generator):
    """Anchor and positive spans of an ``n``-token document.

    Returns ``(anchors, positives)``: int arrays of shape (A, 2) and (A, P, 2)
    holding ``[start, end)`` positions.
    """
    if n < params.required_tokens:
        raise SpanSamplingError(
            f"document of {n} tokens is shorter than the {params.required_tokens} "
            "required (--min-document-tokens, default 2·A·ℓmax)"
        )
    a, p = params.num_anchors, params.num_positives
    lmin, lmax = params.min_length, params.max_length
    anchor_len = span_lengths(rng.beta(*params.anchor_beta, size=a), lmin, lmax)
    starts = place_anchors(n, anchor_len, lmax, rng)
    anchors = np.stack([starts, starts + anchor_len], axis=1)

    pos_len = span_lengths(rng.beta(*params.positive_beta, size=(a, p)), lmin, lmax)
    # start uniform in [start - ℓ_pos, end], clipped so the span stays in the document
    low = np.maximum(0, anchors[:, :1] - pos_len)
    high = np.minimum(anchors[:, 1:2], n - pos_len)
    pos_start = low + np.floor(rng.random((a, p)) * (high - low + 1)).astype(np.int64)
    positives = np.stack([pos_start, pos_start + pos_len], axis=2)
    return anchors, positives
