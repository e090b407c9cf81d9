"""DeCLUTR's span sampling (§3.1.1): Beta lengths, positive windows, anchor spacing, documents."""

import logging

import numpy as np
import pytest
import torch
from scipy import stats

from fairseq_clear.keyed_rng import KeyedRNG
from fairseq_clear.data import DocumentDataset, DocumentSpansDataset
from fairseq_clear.span_sampling import (
    SpanSamplingError,
    SpanSamplingParams,
    place_anchors,
    sample_anchors_and_positives,
)

PAPER = SpanSamplingParams()  # A=2, P=2, ℓmin=32, ℓmax=512, Beta(4,2) / Beta(2,4)


def draw(params, lengths_of_docs, seed=0):
    keyed = KeyedRNG()
    out = []
    for i, n in enumerate(lengths_of_docs):
        out.append((n,) + sample_anchors_and_positives(n, params, keyed(seed, 1, i, 0)))
    return out


def jittered_fraction(lengths, params, rng):
    # ℓ = ⌊p·(ℓmax−ℓmin)⌋ + ℓmin: adding U(0,1) undoes the floor up to 1/(ℓmax−ℓmin)
    return (lengths - params.min_length + rng.random(len(lengths))) / (
        params.max_length - params.min_length
    )


def test_paper_defaults():
    assert (PAPER.num_anchors, PAPER.num_positives) == (2, 2)
    assert (PAPER.min_length, PAPER.max_length) == (32, 512)
    assert PAPER.anchor_beta == (4.0, 2.0) and PAPER.positive_beta == (2.0, 4.0)
    assert PAPER.required_tokens == 2 * 2 * 512  # DeCLUTR's README: A·ℓmax·2


def test_lengths_follow_the_two_beta_distributions():
    rng = np.random.default_rng(0)
    docs = rng.integers(2048, 6000, size=1500)
    samples = draw(PAPER, docs)
    anchor_len = np.concatenate([a[:, 1] - a[:, 0] for _, a, _ in samples])
    pos_len = np.concatenate([p[..., 1].ravel() - p[..., 0].ravel() for _, _, p in samples])
    assert len(anchor_len) == 3000 and len(pos_len) == 6000
    assert anchor_len.min() >= 32 and anchor_len.max() < 512
    assert pos_len.min() >= 32 and pos_len.max() < 512

    u_anchor = jittered_fraction(anchor_len, PAPER, rng)
    u_pos = jittered_fraction(pos_len, PAPER, rng)
    # the right distribution is not rejected, the swapped one is (the test has power)
    assert stats.kstest(u_anchor, stats.beta(4, 2).cdf).pvalue > 1e-3
    assert stats.kstest(u_pos, stats.beta(2, 4).cdf).pvalue > 1e-3
    assert stats.kstest(u_anchor, stats.beta(2, 4).cdf).pvalue < 1e-12
    assert stats.kstest(u_pos, stats.beta(4, 2).cdf).pvalue < 1e-12
    # anchors longer than positives on average (4/6 vs 2/6 of the range)
    assert anchor_len.mean() > 300 > 200 > pos_len.mean()


def test_positives_lie_around_their_anchor_and_take_all_three_kinds():
    rng = np.random.default_rng(1)
    docs = rng.integers(2048, 3000, size=800)
    subsumed = overlapping = adjacent_or_apart = 0
    for n, anchors, positives in draw(PAPER, docs, seed=3):
        for (s, e), pos in zip(anchors, positives):
            for ps, pe in pos:
                length = pe - ps
                assert 0 <= ps and pe <= n
                # start uniform in [start − ℓ_pos, end] (clipped), so the span lies
                # within [start − ℓ_pos, end + ℓ_pos]
                assert max(0, s - length) <= ps <= e
                assert s - length <= ps and pe <= e + length
                if ps >= s and pe <= e:
                    subsumed += 1
                elif pe <= s or ps >= e:
                    adjacent_or_apart += 1
                else:
                    overlapping += 1
    # Figure 1 B: subsumed, overlapping and adjacent positives all occur
    assert subsumed > 100 and overlapping > 100 and adjacent_or_apart > 10


def test_positive_window_is_clipped_at_the_document_edges():
    params = SpanSamplingParams(num_anchors=1, num_positives=8, min_length=4, max_length=16)
    keyed = KeyedRNG()
    for i in range(300):
        n = 32
        anchors, positives = sample_anchors_and_positives(n, params, keyed(5, 1, i, 0))
        assert ((positives[..., 0] >= 0) & (positives[..., 1] <= n)).all()


def test_single_anchor_start_is_uniform():
    params = SpanSamplingParams(num_anchors=1, num_positives=1, min_length=32, max_length=64)
    keyed = KeyedRNG()
    n = 1000
    fractions = []
    for i in range(3000):
        anchors, _ = sample_anchors_and_positives(n, params, keyed(0, 1, i, 0))
        s, e = anchors[0]
        fractions.append((s + 0.5) / (n - (e - s) + 1))  # start uniform in [0, n − ℓ]
    assert stats.kstest(fractions, "uniform").pvalue > 1e-3


@pytest.mark.parametrize("num_anchors", [2, 3, 4])
def test_anchors_of_a_document_are_at_least_max_length_apart(num_anchors):
    params = SpanSamplingParams(num_anchors=num_anchors, num_positives=1, min_length=8, max_length=64)
    keyed = KeyedRNG()
    rng = np.random.default_rng(num_anchors)
    # from the bare minimum (2·A·ℓmax) upwards
    for i, n in enumerate(rng.integers(params.required_tokens, 3 * params.required_tokens, 400)):
        anchors, _ = sample_anchors_and_positives(int(n), params, keyed(0, 1, i, 0))
        ordered = anchors[np.argsort(anchors[:, 0])]
        assert (ordered[1:, 0] - ordered[:-1, 1] >= params.max_length).all()
        assert ordered[0, 0] >= 0 and ordered[-1, 1] <= n


def test_spacing_holds_even_at_the_feasibility_bound():
    # longest anchors in the shortest document that can hold them
    rng = np.random.default_rng(0)
    lengths = np.array([64, 64, 64])
    n = 3 * 64 + 2 * 64
    for _ in range(100):
        starts = place_anchors(n, lengths, 64, rng)
        ends = starts + lengths
        order = np.argsort(starts)
        assert (starts[order][1:] - ends[order][:-1] >= 64).all() and ends.max() <= n
    with pytest.raises(SpanSamplingError):
        place_anchors(n - 1, lengths, 64, rng)


def test_bad_options_are_refused_naming_the_option():
    with pytest.raises(SpanSamplingError, match="--min-document-tokens"):
        SpanSamplingParams(num_anchors=2, max_length=64, min_document_tokens=100).validate()
    with pytest.raises(SpanSamplingError, match="--max-span-length"):
        SpanSamplingParams(min_length=64, max_length=32).validate()
    with pytest.raises(SpanSamplingError, match="--num-anchors"):
        SpanSamplingParams(num_anchors=0).validate()
    with pytest.raises(SpanSamplingError, match="shorter than"):
        sample_anchors_and_positives(100, SpanSamplingParams(max_length=64), np.random.default_rng(0))


class FakeLines:
    """An indexed split in memory: items are ``body </s>``; a separator is a lone ``</s>``."""

    EOS = 2

    def __init__(self, lines):
        self.items = [torch.tensor(list(body) + [self.EOS]) for body in lines]
        self.sizes = np.array([len(x) for x in self.items])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def make_lines(doc_lengths, start_token=10):
    """Documents of the given lengths, split into lines of up to 7 tokens, separated by empty lines."""
    lines, token = [], start_token
    for k, n in enumerate(doc_lengths):
        if k:
            lines.append([])
        body = list(range(token, token + n))
        token += n
        lines += [body[i : i + 7] for i in range(0, n, 7)]
    return lines


def test_short_documents_are_skipped_and_counted(caplog):
    lengths = [300, 40, 256, 255, 500, 10]
    lines = FakeLines(make_lines(lengths))
    with caplog.at_level(logging.INFO):
        docs = DocumentDataset(lines, min_tokens=256, name="train")
    assert len(docs) == 3 and docs.sizes.tolist() == [300, 256, 500]
    assert docs.num_skipped == 3 and docs.num_skipped_tokens == 40 + 255 + 10
    assert "skipped 3 documents shorter than 256 tokens" in caplog.text
    # a document is its lines' bodies, in order, without the </s> of each line
    first = sum(lengths[:2])
    assert docs[1].tolist() == list(range(10 + first, 10 + first + 256))


def test_span_rows_are_the_documents_tokens_and_follow_the_epoch():
    params = SpanSamplingParams(num_anchors=2, num_positives=2, min_length=4, max_length=16)
    docs = DocumentDataset(FakeLines(make_lines([80, 90, 100])), params.required_tokens)
    spans = DocumentSpansDataset(docs, params, seed=1, max_body_len=12, bos=0, eos=2)
    rows = spans[1]
    assert len(rows) == 2 + 2 * 2
    anchors, positives = spans.spans(1)
    doc = docs[1]
    for row, (s, e) in zip(rows, list(anchors) + list(positives.reshape(-1, 2))):
        assert row[0] == 0 and row[-1] == 2
        assert row[1:-1].tolist() == doc[s:e][:12].tolist()  # cut to --tokens-per-sample − 2
    assert all(len(r) <= 14 for r in rows)
    # reproducible for a (seed, epoch, index); new spans next epoch
    again = DocumentSpansDataset(docs, params, seed=1, max_body_len=12, bos=0, eos=2)
    assert all(torch.equal(a, b) for a, b in zip(again[1], rows))
    first = spans.spans(1)[0].tolist()
    spans.set_epoch(2)
    assert spans.spans(1)[0].tolist() != first
