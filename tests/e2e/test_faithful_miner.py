"""clear-mine-negatives against sentence-transformers' own ``util.mine_hard_negatives`` (the
installed version), both fed the same vectors (a stand-in model returning a fixed vector per
text): the default window (``range_max``: ``range_min + num_negatives (x10 with a margin or
max_score) + max_positives``, max_positives counting a repeated pair as sentence-transformers
does), the retrieval count (``range_max + max_positives``), the rows (distinct pairs once, grouped by
anchor) and their scores, on pairs with repeats and an anchor with two positives, with margins.

The documented difference: an anchor's own text is never its negative. Where the corpus holds
it, the anchor's rows are sentence-transformers' on the corpus without that text (one more text
is retrieved for it, so its window holds as many other texts); every other anchor's rows are
sentence-transformers' on the full corpus."""

import json
import re

import numpy as np
import pytest
import torch

from fairseq_clear.cli import mine_negatives as cli
from fairseq_clear.mining import MiningRules, mine

DIM = 6


def _data(seed=0, n=12, others=26):
    rng = np.random.default_rng(seed)
    anchors = [f"anchor {i}" for i in range(n)]
    positives = [f"positive {i}" for i in range(n)]
    pairs = list(zip(anchors, positives))
    pairs += [(anchors[0], positives[5]),  # an anchor with two positives
              (anchors[3], positives[3]), (anchors[0], positives[0]),  # repeated pairs (anchor 0: 3 pairs)
              (anchors[7], positives[7])]
    corpus = [f"other {i}" for i in range(others)]
    vectors = {t: rng.normal(size=DIM) for t in anchors + corpus}
    for i in range(n):  # positives near their anchors
        vectors[positives[i]] = vectors[anchors[i]] + 0.8 * rng.normal(size=DIM)
    unit = {t: (v / np.linalg.norm(v)).astype(np.float32) for t, v in vectors.items()}
    return pairs, corpus, unit


class _StandIn:
    """What mine_hard_negatives asks of a SentenceTransformer, with fixed (unit) vectors."""

    device = torch.device("cpu")

    def __init__(self, vectors):
        self.vectors = vectors

    def encode_document(self, texts, **kwargs):
        return np.stack([self.vectors[t] for t in texts])

    encode_query = encode_document

    def similarity(self, a, b):
        from sentence_transformers.util import cos_sim

        return cos_sim(a, b)

    def similarity_pairwise(self, a, b):
        from sentence_transformers.util import pairwise_cos_sim

        return pairwise_cos_sim(torch.as_tensor(a), torch.as_tensor(b))


def _reference(pairs, corpus, vectors, rules, capsys):
    """sentence-transformers' triplet rows (anchor, positive, negative, negative score) and its
    default range_max (read from what it prints)."""
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    kwargs = {k: getattr(rules, k) for k in ("num_negatives", "range_min", "range_max", "max_score", "min_score",
                                             "absolute_margin", "relative_margin")}
    capsys.readouterr()
    out = mine_hard_negatives(Dataset.from_dict({"anchor": [a for a, _ in pairs], "positive": [p for _, p in pairs]}),
                              _StandIn(vectors), corpus=list(corpus), output_scores=True, verbose=True, **kwargs)
    printed = re.search(r"Setting range_max to (\d+)", capsys.readouterr().out)
    rows = [(r["anchor"], r["positive"], r["negative"], r["scores"][1]) for r in out]
    return rows, int(printed.group(1)) if printed else rules.range_max


def _ours(pairs, corpus, vectors, rules, chunk_size=1000):
    return mine(pairs, lambda texts: np.stack([vectors[t] for t in texts]), rules, corpus, chunk_size=chunk_size)


def _same(got_rows, want_rows):
    assert [r[:3] for r in got_rows] == [r[:3] for r in want_rows]
    np.testing.assert_allclose([r[-1] for r in got_rows], [r[-1] for r in want_rows], atol=1e-5)


RULES = {
    "defaults": MiningRules(),
    "range": MiningRules(num_negatives=2, range_min=2),
    "absolute_margin": MiningRules(num_negatives=2, absolute_margin=0.1),
    "relative_margin": MiningRules(num_negatives=3, relative_margin=0.4),
    # a wide margin leaves only candidates far down the ranking: the retrieval count decides
    "deep_margin": MiningRules(num_negatives=1, absolute_margin=0.7),
    "max_min_score": MiningRules(num_negatives=2, max_score=0.3, min_score=-0.6),
    "explicit_window": MiningRules(num_negatives=2, range_min=1, range_max=6, relative_margin=0.1),
}


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("chunk_size", [1000, 5])
def test_rows_window_and_retrieval_equal_sentence_transformers(name, chunk_size, capsys):
    pairs, corpus, vectors = _data()
    rules = RULES[name]
    want, st_range_max = _reference(pairs, corpus, vectors, rules, capsys)
    result = _ours(pairs, corpus, vectors, rules, chunk_size)
    assert result.range_max == st_range_max
    _same(result.rows, want)
    assert want  # the check checks something
    # retrieval: range_max + max_positives (anchor 0 has 3 pairs, one repeated) per anchor
    texts = len(set(corpus) | {p for _, p in pairs})
    anchors = len({a for a, _ in pairs})
    assert result.counts["retrieved"] == anchors * min(st_range_max + 3, texts)
    # each distinct pair once: 16 input pairs, 13 distinct
    assert result.counts["duplicate_pairs"] == 3
    assert len({r[:3] for r in result.rows}) == len(result.rows)
    assert len(result.positive_scores) == 13
    if name == "deep_margin":  # a case the retrieval count decides: 3 fewer candidates find fewer negatives
        shorter = _ours(pairs, corpus, vectors, MiningRules(num_negatives=1, absolute_margin=0.7,
                                                            range_max=st_range_max - 3))
        assert len(shorter.rows) < len(want)


@pytest.mark.parametrize("name", ["defaults", "absolute_margin", "explicit_window"])
def test_an_anchor_in_the_corpus_is_never_its_own_negative(name, capsys):
    pairs, corpus, vectors = _data()
    rules = RULES[name]
    inside = "anchor 4"
    result = _ours(pairs, corpus + [inside], vectors, rules)
    with_it, _ = _reference(pairs, corpus + [inside], vectors, rules, capsys)
    without_it, _ = _reference(pairs, corpus, vectors, rules, capsys)
    if name == "defaults":  # no margin removes it: sentence-transformers takes the anchor itself
        assert any(r[0] == inside and r[2] == inside for r in with_it)
    _same([r for r in result.rows if r[0] == inside], [r for r in without_it if r[0] == inside])
    _same([r for r in result.rows if r[0] != inside], [r for r in with_it if r[0] != inside])
    assert result.counts["removed_anchor_itself"] == 1


class _Hub:
    def __init__(self, vectors):
        self.vectors = vectors

    def embed(self, texts, **kwargs):
        return np.stack([self.vectors[t] for t in texts])


def test_the_command_writes_each_pair_once_and_reports_the_repeats(tmp_path, monkeypatch, capsys):
    pairs, corpus, vectors = _data()
    train = tmp_path / "train.csv"
    train.write_text("sent0,sent1\n" + "".join(f"{a},{p}\n" for a, p in pairs), encoding="utf-8")
    monkeypatch.setattr(cli, "load_hub", lambda args: _Hub(vectors))
    out = tmp_path / "mined.csv"
    assert cli.main(["--train", str(train), "--checkpoint", str(tmp_path / "ck.pt"), "--cpu", "--out", str(out),
                     "--num-negatives", "2"]) == 0
    printed = capsys.readouterr().out
    rows = out.read_text(encoding="utf-8").splitlines()[1:]
    assert len(rows) == len(set(rows)) == 13 * 2
    report = json.loads((tmp_path / "mined.json").read_text(encoding="utf-8"))
    assert report["counts"]["duplicate_pairs"] == 3 and report["rules"]["range_max"] == 2 + 3
    assert "3 repeated pairs written once" in printed
