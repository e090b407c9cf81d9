"""CLEAR's augmentations as pure functions over token arrays (no fairseq involved)."""

from collections import Counter

import numpy as np
import pytest

from fairseq_clear import augmentations as aug
from fairseq_clear.keyed_rng import KeyedRNG

DEL = 3
RNG = KeyedRNG()


def sentences(count=2000, low=5, high=80, seed=0):
    r = np.random.default_rng(seed)
    return [r.integers(10, 5000, size=r.integers(low, high)) for _ in range(count)]


def rng(i, view=1, seed=1, epoch=1):
    return RNG(seed, epoch, i, view)


def real_count(tokens):
    return int((tokens != DEL).sum())


# ---- del-word -------------------------------------------------------------------
def test_word_deletion_rate_is_the_configured_share():
    deleted = total = 0
    for i, s in enumerate(sentences()):
        out = aug.word_deletion(s, rng(i), 0.7, del_idx=DEL)
        deleted += len(s) - real_count(out)
        total += len(s)
    assert abs(deleted / total - 0.7) < 0.01


def test_word_deletion_merges_consecutive_del_and_keeps_order():
    for i, s in enumerate(sentences(300)):
        out = aug.word_deletion(s, rng(i), 0.7, del_idx=DEL)
        is_del = out == DEL
        assert not (is_del[1:] & is_del[:-1]).any(), "two [DEL] in a row"
        # surviving tokens keep their relative order: a subsequence of the input
        remaining = iter(s.tolist())
        assert all(t in remaining for t in out[~is_del].tolist())


@pytest.mark.parametrize("rate", [0.0, 0.3, 1.0])
def test_word_deletion_never_empties_a_view(rate):
    for i, s in enumerate(sentences(500, low=1, high=6)):
        out = aug.word_deletion(s, rng(i), rate, del_idx=DEL)
        assert real_count(out) >= 1
        if rate == 0.0:
            assert np.array_equal(out, s)


def test_single_token_and_empty_sentences_do_not_crash():
    one = np.array([42])
    empty = np.zeros(0, dtype=np.int64)
    for fn in (
        lambda t, r: aug.word_deletion(t, r, 0.7, del_idx=DEL),
        lambda t, r: aug.span_deletion(t, r, 5, 0.05, del_idx=DEL),
        lambda t, r: aug.reorder(t, r, 5, 0.05),
    ):
        assert np.array_equal(fn(one, rng(0)), one)
        assert len(fn(empty, rng(0))) == 0


# ---- del-span -------------------------------------------------------------------
def test_span_deletion_deletes_count_spans_of_ratio_length():
    s = np.arange(100, 300)  # n = 200: spans of 10 tokens
    for i in range(200):
        out = aug.span_deletion(s, rng(i), 5, 0.05, del_idx=DEL)
        assert real_count(out) == 200 - 5 * 10
        missing = np.setdiff1d(s, out)
        runs = np.split(missing, np.flatnonzero(np.diff(missing) != 1) + 1)
        # each run of deleted tokens is one or more whole 10-token spans, replaced by one [DEL]
        assert all(len(r) % 10 == 0 for r in runs)
        assert int((out == DEL).sum()) == len(runs)


def test_span_deletion_rate_over_many_sentences():
    deleted = total = 0
    for i, s in enumerate(sentences(2000, low=100, high=101)):
        out = aug.span_deletion(s, rng(i), 5, 0.05, del_idx=DEL)
        deleted += len(s) - real_count(out)
        total += len(s)
    assert abs(deleted / total - 0.25) < 0.001  # 5 spans x 5%


@pytest.mark.parametrize("low,high", [(6, 12), (12, 30), (30, 80)])
def test_span_deletion_share_is_count_times_ratio_at_every_length(low, high):
    """Spans of at least one token must not inflate the share in short sentences."""
    deleted = total = 0
    for i, s in enumerate(sentences(4000, low=low, high=high, seed=low)):
        out = aug.span_deletion(s, rng(i), 5, 0.05, del_idx=DEL)
        deleted += len(s) - real_count(out)
        total += len(s)
    assert abs(deleted / total - 0.25) < 0.015


@pytest.mark.parametrize("low,high", [(6, 12), (12, 30), (30, 80)])
def test_reorder_moves_two_pairs_times_ratio_at_every_length(low, high):
    moved = total = 0
    for i, s in enumerate(sentences(4000, low=low, high=high, seed=low)):
        s = np.arange(len(s))  # distinct tokens: every swapped token is displaced
        out = aug.reorder(s, rng(i), 5, 0.05)
        moved += int((out != s).sum())
        total += len(s)
    assert abs(moved / total - 0.5) < 0.03


def test_span_deletion_short_sentences_keep_a_real_token():
    for i, s in enumerate(sentences(500, low=1, high=8)):
        out = aug.span_deletion(s, rng(i), 5, 0.2, del_idx=DEL)
        assert real_count(out) >= 1
        assert not ((out[1:] == DEL) & (out[:-1] == DEL)).any()


@pytest.mark.parametrize("count,ratio", [(1, 0.9), (2, 0.45), (3, 0.3)])
def test_span_deletion_that_does_not_fit_deletes_the_most_it_can(count, ratio):
    """A span of ceil(ratio * n) tokens that leaves no real token used to delete nothing, so
    ``--del-span-count 1 --del-span-ratio 0.9`` left every sentence under 10 tokens unchanged."""
    for i, n in enumerate(range(2, 10)):
        s = np.arange(100, 100 + n)
        out = aug.span_deletion(s, rng(i), count, ratio, del_idx=DEL)
        fits = (n - 1) // count  # the longest span `count` of which leave a real token
        if fits == 0:
            continue  # fewer tokens than spans + 1: stochastic count, as for the paper's values
        assert n - real_count(out) == count * fits, (n, out)


@pytest.mark.parametrize("pairs,ratio", [(1, 0.5), (2, 0.25)])
def test_reorder_that_does_not_fit_swaps_the_longest_spans_it_can(pairs, ratio):
    """2 * pairs spans of ceil(ratio * n) tokens do not fit an odd-length sentence: it used to
    stay unchanged (half the sentences with 1 x 0.5)."""
    for i, n in enumerate(range(2 * pairs, 30)):
        s = np.arange(n)
        out = aug.reorder(s, rng(i), pairs, ratio)
        assert int((out != s).sum()) == 2 * pairs * max(1, min(-(-n * ratio // 1), n // (2 * pairs))), n


# ---- reorder --------------------------------------------------------------------
def test_reorder_keeps_the_token_multiset_and_swaps_pairs_of_spans():
    s = np.arange(1000, 1200)  # n = 200: 5 pairs of 10-token spans
    changed = 0
    for i in range(200):
        out = aug.reorder(s, rng(i), 5, 0.05)
        assert sorted(out.tolist()) == sorted(s.tolist())
        moved = int((out != s).sum())
        assert moved == 100  # 10 spans of 10 tokens, all displaced
        changed += moved > 0
    assert changed == 200


def test_reorder_with_repeated_tokens_keeps_counts():
    for i, s in enumerate(sentences(300)):
        s = s % 7 + 10  # many repeats
        out = aug.reorder(s, rng(i), 5, 0.05)
        assert Counter(out.tolist()) == Counter(s.tolist())


# ---- subs -----------------------------------------------------------------------
def make_index():
    # ids: 10.. are word starts, 100.. are continuations (like sentencepiece's ▁ pieces)
    is_start = np.zeros(300, dtype=bool)
    is_start[:100] = True
    synonyms = {
        (10,): [np.array([11]), np.array([12, 101])],
        (20, 100): [np.array([21])],
        (30,): [np.array([31])],
    }
    return aug.SynonymIndex(is_start, synonyms)


def test_subs_only_touches_words_with_synonyms_and_only_with_listed_ones():
    index = make_index()
    vocab = [np.array([10]), np.array([20, 100]), np.array([30]), np.array([40]), np.array([50, 101])]
    listed = {k: {tuple(v.tolist()) for v in vs} for k, vs in index.synonyms.items()}
    r = np.random.default_rng(0)
    replaced = candidates = 0
    for i in range(3000):
        words = [vocab[j] for j in r.integers(0, len(vocab), size=12)]
        s = np.concatenate(words)
        out = aug.synonym_substitution(s, rng(i), 0.3, index=index)
        out_words = index.words(out)
        assert len(out_words) == len(words)
        for before, after in zip(words, out_words):
            before = tuple(before.tolist())
            if after == before:
                continue
            assert before in listed, f"{before} has no synonyms but became {after}"
            assert after in listed[before], f"{after} is not a listed synonym of {before}"
        candidates += sum(1 for w in words if tuple(w.tolist()) in listed)
        replaced += sum(1 for b, a in zip(words, out_words) if tuple(b.tolist()) != a)
    # 30% of words are picked; every picked word with synonyms is replaced
    assert abs(replaced / candidates - 0.3) < 0.02


def test_subs_without_any_synonym_is_identity():
    index = make_index()
    s = np.array([40, 41, 42, 50, 101])
    for i in range(50):
        assert np.array_equal(aug.synonym_substitution(s, rng(i), 1.0, index=index), s)


# ---- determinism and composition -------------------------------------------------
@pytest.mark.parametrize("spec", ["del-word", "del-span", "reorder", "subs,del-span", "del-span,reorder"])
def test_same_key_same_view_different_view_differs(spec):
    fn = aug.build_augmentation(
        aug.parse_augmentations(spec), aug.AugmentationParams(), DEL, make_index()
    )
    s = np.concatenate([np.array([10, 20, 100, 30]), np.arange(40, 96)])
    a = fn(s, rng(7, view=1))
    b = fn(s, rng(7, view=1))
    assert np.array_equal(a, b), "same (seed, epoch, index, view) must give the same view"
    differs = sum(
        not np.array_equal(fn(s, rng(i, view=1)), fn(s, rng(i, view=2))) for i in range(50)
    )
    assert differs >= 48, "the two views of a sentence should almost always differ"
    assert not np.array_equal(fn(s, rng(7, epoch=1)), fn(s, rng(7, epoch=2)))


def test_composition_applies_in_the_order_written():
    index = make_index()
    params = aug.AugmentationParams(subs_rate=1.0, del_word_rate=0.5)
    s = np.array([10] * 30)
    subs_then_del = aug.build_augmentation(["subs", "del-word"], params, DEL, index)
    out = subs_then_del(s, rng(3))
    assert 10 not in out.tolist()  # every word was substituted before deletion
    assert DEL in out.tolist()


def test_input_array_is_not_modified():
    s = np.arange(10, 60)
    copy = s.copy()
    for spec in ["del-word", "del-span", "reorder", "subs"]:
        fn = aug.build_augmentation([spec], aug.AugmentationParams(subs_rate=1.0), DEL, make_index())
        fn(s, rng(1))
    assert np.array_equal(s, copy)


# ---- configuration errors --------------------------------------------------------
@pytest.mark.parametrize(
    "spec,message",
    [
        ("del-wrod", "unknown augmentation 'del-wrod'"),
        ("", "--augmentations is empty"),
        ("none,del-word", "combines the identity"),
    ],
)
def test_bad_augmentation_names_are_rejected(spec, message):
    with pytest.raises(aug.AugmentationConfigError, match=message):
        aug.parse_augmentations(spec)


@pytest.mark.parametrize("field", ["del_word_rate", "del_span_ratio", "reorder_span_ratio", "subs_rate"])
@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_rates_outside_unit_interval_are_rejected(field, value):
    with pytest.raises(aug.AugmentationConfigError, match="--" + field.replace("_", "-")):
        aug.AugmentationParams(**{field: value}).validate()


def test_subs_without_table_and_deletion_without_del_symbol_are_rejected():
    with pytest.raises(aug.AugmentationConfigError, match="--synonym-table"):
        aug.build_augmentation(["subs"], aug.AugmentationParams(), DEL, None)
    with pytest.raises(aug.AugmentationConfigError, match=r"\[DEL\]"):
        aug.build_augmentation(["del-word"], aug.AugmentationParams(), None, None)


def test_mixture_draws_compositions_with_the_given_probabilities():
    mixture = aug.parse_mixture("del-word:0.25;reorder:0.75")
    fn = aug.build_mixture(mixture, aug.AugmentationParams(), DEL)
    s = np.arange(10, 110)
    kinds = Counter()
    for i in range(4000):
        out = fn(s, rng(i))
        kinds["del" if DEL in out.tolist() else "reorder"] += 1
    assert abs(kinds["del"] / 4000 - 0.25) < 0.03


def test_reorder_unequal_swaps_spans_of_different_lengths():
    """--reorder-unequal (Fig. 2c): still a permutation; one swapped pair of lengths la, lb
    shifts the text between them by la - lb, which an equal-length swap never does."""
    rng = np.random.default_rng(0)
    for n in list(range(1, 60)) + [200, 513]:
        x = np.arange(n) + 4
        for _ in range(5):
            y = aug.reorder(x, rng, 5, 0.05, unequal=True)
            assert sorted(y.tolist()) == x.tolist(), n

    def shift_balance(unequal):
        x = np.arange(100)
        y = aug.reorder(x, rng, 1, 0.1, unequal=unequal)
        changed = np.flatnonzero(y != x)
        if len(changed) == 0:
            return 0
        i, j = changed[0], changed[-1]
        return (y[i] - i) + (y[j] - j)  # b - a at the first span, a - b + (la - lb) at the last

    assert all(shift_balance(False) == 0 for _ in range(200))
    unequal = [shift_balance(True) for _ in range(200)]
    assert sum(v != 0 for v in unequal) > 150
    assert max(abs(v) for v in unequal) <= 2 * 10 - 2  # lengths in 1 .. 2·10 − 1
