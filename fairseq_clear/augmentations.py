"""Sentence augmentations of CLEAR (Wu et al. 2020, §3.3 and §4.1).

Every augmentation is a pure function ``f(tokens, rng, ...) -> tokens`` over a
1-D integer array holding the *body* of a sentence (no ``<s>``/``</s>``), and
an ``np.random.Generator``. They import nothing from fairseq, so they can be
tested and benchmarked on plain arrays.

Invariants shared by all of them:

* a view is never empty: deletions always keep at least one real (non-``[DEL]``)
  token, and a sentence with a single real token is returned unchanged;
* consecutive ``[DEL]`` tokens are merged into one, so that the model cannot
  tell a deleted span from a deleted word by counting ``[DEL]`` tokens (§3.3);
* the input array is never modified.
"""

import math
from dataclasses import dataclass, field, fields
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from .errors import FairseqClearError

#: Names used on the command line (``--augmentations``), as in the paper's tables.
DEL_WORD = "del-word"
DEL_SPAN = "del-span"
REORDER = "reorder"
SUBS = "subs"
WORD_REP = "word-rep"
#: --word-rep-views: the views word-rep repeats in
WORD_REP_VIEWS = ("positive", "both")
#: fairseq's own specials (<s>, <pad>, </s>, <unk>) are a dictionary's first ids (docs/design.md)
FAIRSEQ_SPECIALS = 4
#: Identity: both views are the input sentence; dropout is the only noise (SimCSE).
IDENTITY = ("none", "dropout")
#: the augmentations that write [DEL]: each needs the symbol in the dictionary (the task adds it),
#: and the views they make have consecutive [DEL]s merged (build_augmentation)
DELETIONS = (DEL_WORD, DEL_SPAN)

Augmentation = Callable[[np.ndarray, np.random.Generator], np.ndarray]


class AugmentationConfigError(FairseqClearError, ValueError):
    """An augmentation option is invalid; the message names the option."""


def span_length(n: int, ratio: float) -> int:
    """Length of one span covering ``ratio`` of an ``n``-token sentence, rounded up (at least 1).

    Rounding up (then deleting or swapping fewer spans where that overshoots)
    keeps the expected share of touched tokens exact at every sentence length.
    """
    return max(1, math.ceil(ratio * n - 1e-9))


def stochastic_round(x: float, rng: np.random.Generator) -> int:
    """``floor(x)`` or ``ceil(x)``, so that the expected value is exactly ``x``.

    This keeps the configured rate exact on average even for short sentences,
    where a plain ``round`` would bias it (fairseq's masking does the same).
    """
    return int(x + rng.random())


def disjoint_span_starts(n: int, count: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """Start positions of ``count`` non-overlapping spans of ``length`` tokens in ``[0, n)``.

    Uniform over all valid placements: with ``t_i = s_i - i*(length-1)`` the
    starts become ``count`` distinct sorted values of ``range(n - count*length + count)``.
    Returns a sorted array (empty if ``count`` is 0).
    """
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    slots = n - count * length + count
    t = np.sort(np.argsort(rng.random(slots))[:count])
    return t + np.arange(count) * (length - 1)


def merge_deletions(tokens: np.ndarray, del_idx: int) -> np.ndarray:
    """Collapse every run of consecutive ``del_idx`` tokens into one."""
    is_del = tokens == del_idx
    if not is_del.any():
        return tokens
    keep = np.ones(len(tokens), dtype=bool)
    keep[1:] = ~(is_del[1:] & is_del[:-1])
    return tokens[keep]


def _delete_and_merge(tokens: np.ndarray, is_del: np.ndarray, del_idx: int) -> np.ndarray:
    """``tokens`` with the positions in ``is_del`` set to ``del_idx``, runs merged (as merge_deletions)."""
    keep = np.empty(len(tokens), dtype=bool)
    keep[0] = True
    np.logical_not(is_del[1:] & is_del[:-1], out=keep[1:])
    out = tokens.copy()
    out[is_del] = del_idx
    return out[keep]


def word_deletion(
    tokens: np.ndarray, rng: np.random.Generator, rate: float = 0.7, *, del_idx: int
) -> np.ndarray:
    """``del-word``: replace ``rate`` of the real tokens by ``[DEL]``, then merge runs.

    The number deleted is ``rate * n`` rounded stochastically and capped at
    ``n - 1``, so at least one real token survives.
    """
    # fewer numpy calls than flatnonzero + merge_deletions: this runs twice per sentence
    is_del = tokens == del_idx
    has_del = bool(is_del.any())
    real = np.flatnonzero(~is_del) if has_del else None
    n = len(real) if has_del else len(tokens)
    if n <= 1:
        return tokens.copy()
    k = min(stochastic_round(rate * n, rng), n - 1)
    if k > 0:
        chosen = np.argsort(rng.random(n))[:k]
        is_del[real[chosen] if has_del else chosen] = True
    elif not has_del:
        return tokens.copy()
    return _delete_and_merge(tokens, is_del, del_idx)


def span_deletion(
    tokens: np.ndarray,
    rng: np.random.Generator,
    count: int = 5,
    ratio: float = 0.05,
    *,
    del_idx: int,
) -> np.ndarray:
    """``del-span``: delete ``count`` spans of ``ratio * n`` tokens, each replaced by one ``[DEL]``.

    Spans do not overlap (adjacent spans merge into one ``[DEL]``). A span has
    ``ceil(ratio * n)`` tokens (at least one); where rounding up would overshoot,
    fewer spans are deleted, so that the expected deleted share is
    ``count * ratio`` (25% with the paper's values) at every length, and a real
    token always remains. Where ``count`` spans of that length leave no real token,
    the spans are shortened to the longest that do (as close to the asked share as the
    sentence allows), rather than the sentence being left unchanged.
    Spans are placed over the real tokens; ``[DEL]`` tokens from an earlier
    augmentation stay where they are.
    """
    is_del = tokens == del_idx
    has_del = bool(is_del.any())
    real = np.flatnonzero(~is_del) if has_del else None
    n = len(real) if has_del else len(tokens)
    if n <= 1:
        return tokens.copy()
    # a span that would not fit (count spans of ceil(ratio * n) tokens and one real token
    # left) is shortened to the longest that does: else a short sentence kept every token
    # (1 x 0.9 changed no sentence under 10 tokens)
    length = max(1, min(span_length(n, ratio), (n - 1) // max(count, 1)))
    # spans are rounded up to whole tokens (at least one), so deleting all `count`
    # of them would overshoot count * ratio in short sentences: delete fewer there,
    # keeping the expected share exact at every length (and a real token left)
    count = min(count, stochastic_round(count * ratio * n / length, rng), (n - 1) // length)
    if count <= 0:
        return tokens.copy()
    starts = disjoint_span_starts(n, count, length, rng)
    covered = starts if length == 1 else (starts[:, None] + np.arange(length)).ravel()
    is_del[real[covered] if has_del else covered] = True
    return _delete_and_merge(tokens, is_del, del_idx)


def reorder(
    tokens: np.ndarray, rng: np.random.Generator, pairs: int = 5, ratio: float = 0.05,
    unequal: bool = False,
) -> np.ndarray:
    """``reorder``: pick ``pairs`` pairs of spans (each ``ratio * n`` tokens) and swap each pair.

    The ``2 * pairs`` spans do not overlap and are paired at random; the output
    is a permutation of the input (same multiset of tokens). As in
    :func:`span_deletion`, short sentences swap fewer pairs, keeping the expected
    share of moved tokens at ``2 * pairs * ratio``. With ``unequal`` (Fig. 2c of the
    paper swaps spans of different lengths) each span's length is drawn uniformly from
    1 .. 2·ratio·n − 1 (mean ratio·n, so the spans still cover 2·pairs·ratio of the tokens on
    average); the text between two swapped spans keeps its order but shifts by their difference.
    """
    n = len(tokens)
    # as in span_deletion, spans that would not fit (2 * pairs spans of ceil(ratio * n)
    # tokens) are shortened to the longest that do, rather than nothing being swapped
    length = max(1, min(span_length(n, ratio), n // (2 * max(pairs, 1))))
    # as in span_deletion: short sentences swap fewer pairs, so the expected share
    # of moved tokens stays 2 * pairs * ratio at every length
    pairs = min(pairs, stochastic_round(pairs * ratio * n / length, rng), n // (2 * length))
    if pairs <= 0:
        return tokens.copy()
    if unequal:
        return _swap_unequal_spans(tokens, rng, pairs, length)
    starts = disjoint_span_starts(n, 2 * pairs, length, rng)
    starts = starts[rng.permutation(2 * pairs)].reshape(pairs, 2)
    offsets = np.arange(length)
    a = (starts[:, 0:1] + offsets).ravel()
    b = (starts[:, 1:2] + offsets).ravel()
    perm = np.arange(n)
    perm[a], perm[b] = b, a
    return tokens[perm]


def _swap_unequal_spans(tokens: np.ndarray, rng: np.random.Generator, pairs: int, length: int) -> np.ndarray:
    """Swap ``pairs`` random pairs among ``2 * pairs`` disjoint spans of random lengths (mean ``length``)."""
    n, count = len(tokens), 2 * pairs
    lengths = rng.integers(1, 2 * length, size=count)  # uniform on 1 .. 2·length − 1
    while lengths.sum() > n:  # rare at 2·pairs·length <= n: shorten the longest span
        lengths[int(np.argmax(lengths))] -= 1
    free = n - int(lengths.sum())
    # the free tokens fall into the count + 1 gaps around the spans, uniformly (stars and bars)
    cuts = np.sort(rng.integers(0, free + 1, size=count))
    gaps = np.diff(np.concatenate([[0], cuts, [free]]))
    starts = gaps[0] + np.concatenate([[0], np.cumsum(lengths[:-1] + gaps[1:-1])])
    partner = np.arange(count)
    pairing = rng.permutation(count).reshape(pairs, 2)
    partner[pairing[:, 0]], partner[pairing[:, 1]] = pairing[:, 1], pairing[:, 0]
    pieces = [tokens[: starts[0]]]
    for i in range(count):
        j = partner[i]
        pieces.append(tokens[starts[j]: starts[j] + lengths[j]])
        end = starts[i] + lengths[i]
        pieces.append(tokens[end: starts[i + 1] if i + 1 < count else n])
    return np.concatenate(pieces)


class SynonymIndex:
    """Synonyms at the level of dictionary ids, for :func:`synonym_substitution`.

    Args:
        is_word_start: boolean array over the dictionary; True where a symbol
            starts a word (sentencepiece's ``▁`` prefix, and special symbols).
        synonyms: maps a word, as a tuple of dictionary ids, to the id arrays
            of its synonyms.
    """

    def __init__(self, is_word_start: np.ndarray, synonyms: Dict[Tuple[int, ...], List[np.ndarray]]):
        self.is_word_start = np.asarray(is_word_start, dtype=bool)
        self.synonyms = synonyms

    def __len__(self):
        return len(self.synonyms)

    def word_starts(self, tokens: np.ndarray) -> np.ndarray:
        """Start offsets of the words of ``tokens`` (the first token always starts one)."""
        starts = np.flatnonzero(self.is_word_start[tokens])
        if len(tokens) and (len(starts) == 0 or starts[0] != 0):
            starts = np.concatenate([[0], starts])
        return starts

    def words(self, tokens: np.ndarray) -> List[Tuple[int, ...]]:
        """The words of ``tokens`` as id tuples (used for coverage statistics)."""
        bounds = np.append(self.word_starts(tokens), len(tokens))
        return [tuple(tokens[s:e].tolist()) for s, e in zip(bounds[:-1], bounds[1:])]


def synonym_substitution(
    tokens: np.ndarray,
    rng: np.random.Generator,
    rate: float = 0.3,
    *,
    index: SynonymIndex,
) -> np.ndarray:
    """``subs``: pick ``rate`` of the words and replace each by one of its synonyms.

    A word is a run of pieces from one word-start piece to the next. Picked
    words without a synonym stay as they are, so the share of words actually
    changed is ``rate`` times the share of words that have a synonym (the
    paper reports that about 40% of corpus tokens have one).
    """
    starts = index.word_starts(tokens)
    w = len(starts)
    if w == 0:
        return tokens.copy()
    k = min(stochastic_round(rate * w, rng), w)
    if k == 0:
        return tokens.copy()
    picked = sorted(np.argsort(rng.random(w))[:k].tolist())
    # plain lists: numpy calls per word cost more than the lookups themselves
    bounds = starts.tolist()
    bounds.append(len(tokens))
    ids = tokens.tolist()
    out, last, changed = [], 0, False
    lookup = index.synonyms.get
    for i in picked:
        s, e = bounds[i], bounds[i + 1]
        options = lookup(tuple(ids[s:e]))
        if not options:
            continue
        out += ids[last:s]
        out += options[int(rng.integers(len(options)))].tolist()
        last, changed = e, True
    if not changed:
        return tokens.copy()
    out += ids[last:]
    return np.array(out, dtype=tokens.dtype)


def word_repetition(
    tokens: np.ndarray,
    rng: np.random.Generator,
    rate: float = 0.32,
    *,
    del_idx: Optional[int] = None,
    max_len: Optional[int] = None,
) -> np.ndarray:
    """``word-rep`` (ESimCSE, Wu et al. 2022, §3.1): repeat ``dup_len`` tokens, each right after
    itself, so that a positive pair no longer shares its length.

    ``dup_len`` is uniform on ``0 .. max(2, int(rate * n))`` (the paper's formula) over the ``n``
    tokens that may repeat: never ``[DEL]`` (its runs stay merged) nor fairseq's specials (a block's
    inner ``</s>``); the positions are uniform among them. With ``max_len``, at most
    ``max_len - len(tokens)`` are repeated, so the view is never cut at the model's length.
    """
    may = tokens >= FAIRSEQ_SPECIALS
    if del_idx is not None:
        may &= tokens != del_idx
    candidates = np.flatnonzero(may)
    n = len(candidates)
    room = n if max_len is None else max(0, min(n, max_len - len(tokens)))
    k = min(int(rng.integers(0, max(2, int(rate * n)) + 1)), room)
    if k == 0:
        return tokens.copy()
    chosen = candidates[np.sort(np.argsort(rng.random(n))[:k])]
    return np.insert(tokens, chosen + 1, tokens[chosen])


def identity(tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``none``/``dropout``: the view is the sentence itself (SimCSE's unsupervised setting)."""
    return tokens.copy()


@dataclass
class AugmentationParams:
    """Rates and counts of the four augmentations; defaults are the paper's (§4.1).

    Each is declared here once, with its help text: ``--task clear``'s config inherits these
    fields as its options (``--del-word-rate`` ...), and :meth:`from_config` reads them back
    from a config, so a new rate is one field here.
    """

    del_word_rate: float = field(
        default=0.7, metadata={"help": "del-word: share of tokens replaced by [DEL] (paper: 0.7)"}
    )
    del_span_count: int = field(
        default=5, metadata={"help": "del-span: number of spans deleted (paper: 5); short sentences lose fewer spans so that the expected deleted share stays count x ratio (25%)"}
    )
    del_span_ratio: float = field(
        default=0.05,
        metadata={"help": "del-span: length of each span as a share of the sentence, rounded up to whole tokens (paper: 0.05)"},
    )
    reorder_pairs: int = field(
        default=5, metadata={"help": "reorder: number of span pairs swapped (paper: 5); fewer in short sentences, keeping the expected moved share at 2 x pairs x ratio"}
    )
    reorder_span_ratio: float = field(
        default=0.05,
        metadata={"help": "reorder: length of each span as a share of the sentence, rounded up to whole tokens (paper: ~0.05)"},
    )
    reorder_unequal: bool = field(
        default=False,
        metadata={
            "help": "reorder: swap spans of different lengths (Fig. 2c of the paper draws them so), each "
            "drawn from 1 .. 2 x ratio x n - 1 tokens, same mean; default: spans of equal length"
        },
    )
    subs_rate: float = field(
        default=0.3,
        metadata={
            "help": "subs: share of words replaced by a synonym (paper: 0.3); words "
            "without a synonym stay"
        },
    )

    # ESimCSE's code (caskcsg/sentemb, ESimCSE/train.py at commit 9ab271bb3f14, prepare_features):
    # --dup_rate defaults to 0.05 (the paper's best for BERT-base, §5, is 0.32); --dup_type word draws
    # randrange(min(10, n, max(2, int(dup_rate x n)))) words (split on spaces, never the last), bpe
    # randrange(min(10, int(dup_rate x n))) subword tokens: 0 .. the bound - 1, at most 9; here the
    # paper's formula (§3.1) over subword tokens
    word_rep_rate: float = field(
        default=0.32,
        metadata={
            "help": "word-rep (ESimCSE): a view repeats dup_len tokens, dup_len uniform on 0 .. "
            "max(2, int(rate x n)) (ESimCSE's paper, §3.1; 0.32 its best for BERT-base; its code's "
            "default: 0.05, and it repeats at most 9)"
        },
    )
    # ESimCSE's code (ESimCSE/train.py at 9ab271bb3f14) repeats words in the second view only
    # (sent1: the positive); the first view is the sentence itself
    word_rep_views: str = field(
        default="positive",
        metadata={
            "help": "which views word-rep repeats in: positive = the second view only, the anchor is "
            "left as it is (ESimCSE's code); both = each view repeats its own tokens (the other "
            "augmentations of the composition apply to both views either way)"
        },
    )
    #: not an option (no annotation: fairseq lists every dataclass field, ClassVars too): the longest
    #: view body, --tokens-per-sample - 2 of the config (word-rep stays within it); None = no limit
    max_len = None

    @classmethod
    def from_config(cls, cfg) -> "AugmentationParams":
        """The rates of a config that holds these fields (a task config, an OmegaConf node), and
        its longest view body when it gives --tokens-per-sample."""
        params = cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})
        tokens_per_sample = getattr(cfg, "tokens_per_sample", None)
        if isinstance(tokens_per_sample, int):
            params.max_len = tokens_per_sample - 2  # <s> and </s> around the body
        return params

    def validate(self):
        if self.word_rep_views not in WORD_REP_VIEWS:
            raise AugmentationConfigError(
                f"--word-rep-views must be one of {', '.join(WORD_REP_VIEWS)}, got '{self.word_rep_views}'"
            )
        for name in ("del_word_rate", "del_span_ratio", "reorder_span_ratio", "subs_rate", "word_rep_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise AugmentationConfigError(
                    f"--{name.replace('_', '-')} must be in [0, 1], got {value}"
                )
        for name in ("del_span_count", "reorder_pairs"):
            value = getattr(self, name)
            if value < 0:
                raise AugmentationConfigError(
                    f"--{name.replace('_', '-')} must be >= 0, got {value}"
                )
        # the expected share touched is count x ratio; at 1 or more nothing fits in a
        # sentence (a real token must survive a deletion; swapped spans must not overlap)
        if self.del_span_count * self.del_span_ratio >= 1.0:
            raise AugmentationConfigError(
                f"--del-span-count x --del-span-ratio is the expected share deleted and must be "
                f"below 1, got {self.del_span_count} x {self.del_span_ratio} (paper: 5 x 0.05 = 0.25)"
            )
        if 2 * self.reorder_pairs * self.reorder_span_ratio > 1.0:
            raise AugmentationConfigError(
                f"2 x --reorder-pairs x --reorder-span-ratio is the expected share moved and must be "
                f"at most 1, got 2 x {self.reorder_pairs} x {self.reorder_span_ratio} "
                "(paper: 2 x 5 x 0.05 = 0.5)"
            )


def parse_augmentations(spec: str) -> List[str]:
    """Split ``"subs,del-span"`` into names, checking each against :data:`BUILDERS`."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise AugmentationConfigError(
            "--augmentations is empty; use e.g. 'del-word', 'subs,del-span' or 'none'"
        )
    for name in names:
        if name not in BUILDERS:
            raise AugmentationConfigError(
                f"--augmentations: unknown augmentation '{name}'; "
                f"choose from {', '.join(BUILDERS)}"
            )
    if any(n in IDENTITY for n in names) and len(names) > 1:
        raise AugmentationConfigError(
            f"--augmentations: '{spec}' combines the identity with other augmentations"
        )
    return names


def parse_mixture(spec: str) -> List[Tuple[str, float]]:
    """Parse ``"del-word:0.5;subs,del-span:0.5"`` into (composition, probability) pairs.

    Used for mixed augmentations (the paper's future work, §3.1): each view
    draws its composition independently from this distribution.
    """
    entries = []
    for part in [p.strip() for p in spec.split(";") if p.strip()]:
        comp, sep, prob = part.rpartition(":")
        if not sep:
            raise AugmentationConfigError(
                f"--augmentation-mix: '{part}' needs a probability, e.g. 'del-word:0.5'"
            )
        try:
            parse_augmentations(comp)
        except AugmentationConfigError as e:  # name the option the user wrote
            detail = str(e).replace("--augmentations: ", "").replace("--augmentations", f"'{comp}'")
            raise AugmentationConfigError(f"--augmentation-mix: {detail}") from None
        try:
            p = float(prob)
        except ValueError:
            raise AugmentationConfigError(
                f"--augmentation-mix: probability '{prob}' of '{comp}' is not a number"
            ) from None
        if p < 0:
            raise AugmentationConfigError(
                f"--augmentation-mix: probability of '{comp}' is negative ({p})"
            )
        entries.append((comp, p))
    if not entries or sum(p for _, p in entries) <= 0:
        raise AugmentationConfigError(
            f"--augmentation-mix: '{spec}' has no composition with a positive probability"
        )
    return entries


def _subs(params: AugmentationParams, del_idx, index: Optional[SynonymIndex]) -> Augmentation:
    if index is None:
        raise AugmentationConfigError(
            "'subs' needs a synonym table: pass --synonym-table (a JSON word -> [synonyms])"
        )
    return lambda t, r: synonym_substitution(t, r, params.subs_rate, index=index)


def _merges_its_runs(step: Augmentation) -> Augmentation:
    # its views never hold two [DEL]s in a row: used alone, it skips build_augmentation's merge pass
    step.merges_deletions = True
    return step


#: each augmentation's step, built from the rates, [DEL]'s id and the synonym index: a new
#: augmentation is one entry here, its rates in AugmentationParams, and its name in DELETIONS
#: when it writes [DEL] (then the task adds the symbol and build_augmentation merges its runs)
BUILDERS: Dict[str, Callable[[AugmentationParams, Optional[int], Optional[SynonymIndex]], Augmentation]] = {
    DEL_WORD: lambda p, d, s: _merges_its_runs(lambda t, r: word_deletion(t, r, p.del_word_rate, del_idx=d)),
    DEL_SPAN: lambda p, d, s: _merges_its_runs(
        lambda t, r: span_deletion(t, r, p.del_span_count, p.del_span_ratio, del_idx=d)),
    REORDER: lambda p, d, s: lambda t, r: reorder(t, r, p.reorder_pairs, p.reorder_span_ratio, p.reorder_unequal),
    SUBS: _subs,
    WORD_REP: lambda p, d, s: lambda t, r: word_repetition(t, r, p.word_rep_rate, del_idx=d, max_len=p.max_len),
    **{name: (lambda p, d, s: identity) for name in IDENTITY},
}


def build_augmentation(
    names: Sequence[str],
    params: AugmentationParams,
    del_idx: Optional[int] = None,
    synonym_index: Optional[SynonymIndex] = None,
) -> Augmentation:
    """Compose augmentations in the order written (``subs,del-span``: substitute, then delete spans)."""
    params.validate()
    steps: List[Augmentation] = []
    for name in names:
        if name in DELETIONS and del_idx is None:
            raise AugmentationConfigError(
                f"'{name}' needs the [DEL] symbol, but the dictionary has none"
            )
        if name not in BUILDERS:  # parse_augmentations already rejects these
            raise AugmentationConfigError(f"unknown augmentation '{name}'")
        steps.append(BUILDERS[name](params, del_idx, synonym_index))

    deletes = del_idx is not None and any(n in DELETIONS for n in names)
    if len(steps) == 1 and (not deletes or getattr(steps[0], "merges_deletions", False)):
        return steps[0]

    def composed(tokens, rng):
        for step in steps:
            tokens = step(tokens, rng)
        # §3.3: consecutive [DEL]s become one, also when a later step (reorder,
        # subs) brought two together, and for any deletion that does not merge its own
        return merge_deletions(tokens, del_idx) if deletes else tokens

    return composed


def without_word_rep(names: Sequence[str]) -> List[str]:
    """The composition ``names`` without word-rep (the anchor view of --word-rep-views positive)."""
    kept = [n for n in names if n != WORD_REP]
    return kept or [IDENTITY[0]]


def changed_share(original: np.ndarray, augmented: np.ndarray) -> float:
    """Share of ``original``'s tokens that the augmentation changed.

    Tokens missing from the output (deleted or substituted) count as changed, as do
    tokens the output adds beyond those (word-rep's copies: a view that only inserts
    changed as many tokens as it inserted), and for an output of the same length so
    do moved ones (reorder).
    """
    n = len(original)
    if n == 0:
        return 0.0
    values, counts = np.unique(original, return_counts=True)
    out_counts = dict(zip(*np.unique(augmented, return_counts=True)))
    kept = sum(min(c, out_counts.get(v, 0)) for v, c in zip(values.tolist(), counts.tolist()))
    share = max(n - kept, len(augmented) - kept) / n
    if len(augmented) == n:
        share = max(share, float(np.mean(original != augmented)))
    return share


def build_mixture(
    mixture: Sequence[Tuple[str, float]],
    params: AugmentationParams,
    del_idx: Optional[int] = None,
    synonym_index: Optional[SynonymIndex] = None,
) -> Augmentation:
    """An augmentation that first draws a composition from ``mixture``, then applies it."""
    fns = [
        build_augmentation(parse_augmentations(comp), params, del_idx, synonym_index)
        for comp, _ in mixture
    ]
    cdf = np.cumsum([p for _, p in mixture], dtype=np.float64)
    cdf /= cdf[-1]

    def mixed(tokens, rng):
        choice = min(int(np.searchsorted(cdf, rng.random(), side="right")), len(fns) - 1)
        return fns[choice](tokens, rng)

    return mixed
