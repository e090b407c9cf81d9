"""clear-mine-negatives: rows and scores against a brute-force numpy search; each rule (rank range,
absolute and relative margin, max/min score) removes what it should; chunked search equals the
one-piece search; the output round-trips through clear-prepare-pairs; the command end to end."""

import csv
import json

import numpy as np
import pytest

from fairseq_clear.mining import MiningError, MiningRules, mine, write_rows
from helpers import bin_path, make_binarized, run_cli, synthetic_sentences

DIM = 6


def _setup(n_pairs=14, extra_corpus=10, seed=0):
    rng = np.random.default_rng(seed)
    anchors = [f"anchor {i}" for i in range(n_pairs)]
    positives = [f"positive {i}" for i in range(n_pairs)]
    pairs = list(zip(anchors, positives))
    pairs.append((anchors[0], positives[5]))  # an anchor with two positives
    pairs.append((anchors[3], positives[3]))  # a repeated pair
    corpus = [f"other {i}" for i in range(extra_corpus)] + [anchors[2]]  # an anchor's own text in the corpus
    vectors = {}
    for t in anchors + positives + corpus:
        vectors.setdefault(t, rng.normal(size=DIM))
    for i in range(n_pairs):  # positives near their anchors
        vectors[positives[i]] = vectors[anchors[i]] + 0.7 * rng.normal(size=DIM)
    return pairs, corpus, (lambda texts: np.stack([vectors[t] for t in texts]).astype(np.float32)), vectors


def _cos(u, v):
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def _brute(pairs, corpus, vectors, rules):
    """sentence-transformers' rules written out with plain loops, in float64."""
    texts = list(dict.fromkeys(list(corpus or []) + [p for _, p in pairs]))
    queries = list(dict.fromkeys(a for a, _ in pairs))
    pos = {q: list(dict.fromkeys(p for a, p in pairs if a == q)) for q in queries}
    max_positives = max(sum(a == q for a, _ in pairs) for q in queries)  # a repeated pair counts twice
    range_max = rules.resolved_range_max(max_positives)
    chosen, removed = {}, {}
    for q in queries:
        k = min(range_max + max_positives + (q in texts), len(texts))  # + 1: room for the anchor itself
        scored = sorted(((_cos(vectors[q], vectors[t]), t) for t in texts), key=lambda x: -x[0])[:k]
        threshold = min(_cos(vectors[q], vectors[p]) for p in pos[q])
        valid = []
        for s, t in scored:
            reason = ("positive" if t in pos[q] else "anchor_itself" if t == q else
                      "absolute_margin" if rules.absolute_margin is not None and s + rules.absolute_margin > threshold else
                      "relative_margin" if rules.relative_margin is not None
                      and s > threshold - abs(threshold) * rules.relative_margin else
                      "max_score" if rules.max_score is not None and s > rules.max_score else
                      "min_score" if rules.min_score is not None and s < rules.min_score else None)
            if reason:
                removed[reason] = removed.get(reason, 0) + 1
            else:
                valid.append((t, s))
        chosen[q] = valid[:range_max][rules.range_min:][:rules.num_negatives]
    rows = [(a, p, t, s) for a in queries for p in pos[a] for t, s in chosen[a]]  # each distinct pair once
    return rows, removed


def _same_rows(result, want):
    assert [r[:3] for r in result.rows] == [r[:3] for r in want]
    np.testing.assert_allclose([r[4] for r in result.rows], [r[3] for r in want], atol=1e-6)


RULES = {
    "plain": MiningRules(num_negatives=3),
    "range": MiningRules(num_negatives=2, range_min=2, range_max=6),
    "absolute_margin": MiningRules(num_negatives=3, absolute_margin=0.1),
    "relative_margin": MiningRules(num_negatives=3, relative_margin=0.2),
    "max_min_score": MiningRules(num_negatives=4, max_score=0.5, min_score=-0.3),
}


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("chunk_size", [1000, 4])
def test_rows_and_scores_equal_a_brute_force_search(name, chunk_size):
    pairs, corpus, encode, vectors = _setup()
    rules = RULES[name]
    result = mine(pairs, encode, rules, corpus, chunk_size=chunk_size)
    want, removed = _brute(pairs, corpus, vectors, rules)
    _same_rows(result, want)
    for reason, n in removed.items():
        assert result.counts[f"removed_{reason}"] == n, reason
    assert result.counts["rows_written"] == len(want) > 0


def test_each_rule_excludes_what_it_should():
    pairs, corpus, encode, vectors = _setup()
    plain = {(a, n): s for a, _, n, _, s in mine(pairs, encode, MiningRules(num_negatives=8), corpus).rows}
    # rank range: the two best negatives of each anchor are skipped, the next ones taken
    ranged = mine(pairs, encode, MiningRules(num_negatives=2, range_min=2, range_max=5), corpus)
    for a in {a for a, _ in pairs}:
        best = sorted((s, n) for (b, n), s in plain.items() if b == a)[::-1]
        taken = {n for b, _, n, _, _ in ranged.rows if b == a}
        assert taken == {n for _, n in best[2:4]}, a
    # margins: every negative kept is far enough below its positive
    for rules, ok in ((MiningRules(absolute_margin=0.15), lambda s, p: s + 0.15 <= p),
                      (MiningRules(relative_margin=0.3), lambda s, p: s <= p - abs(p) * 0.3)):
        result = mine(pairs, encode, rules, corpus)
        pos = {}
        for a, p, *_ in result.rows:
            pos.setdefault(a, []).append(_cos(vectors[a], vectors[p]))
        assert result.rows and all(ok(s, min(pos[a])) for a, _, _, _, s in result.rows)
        removed = [k for k in result.counts if k.endswith("margin")]
        assert removed and all(result.counts[k] > 0 for k in removed)
    # positives and the anchor's own text are never negatives
    for a, p, n, _, _ in mine(pairs, encode, MiningRules(num_negatives=20, range_max=40), corpus).rows:
        assert n != a and (a, n) not in set(pairs)


def test_random_sampling_is_seeded_and_draws_from_the_allowed_ranks():
    pairs, corpus, encode, vectors = _setup()
    rules = MiningRules(num_negatives=2, range_max=8, sampling_strategy="random", seed=3)
    a, b = mine(pairs, encode, rules, corpus), mine(pairs, encode, rules, corpus)
    assert a.rows == b.rows
    allowed = {(x, n) for x, _, n, _, _ in mine(pairs, encode, MiningRules(num_negatives=8, range_max=8), corpus).rows}
    assert all((x, n) in allowed for x, _, n, _, _ in a.rows)


@pytest.mark.parametrize("kwargs,flag", [({"num_negatives": 0}, "--num-negatives"), ({"range_min": -1}, "--range-min"),
                                         ({"range_min": 3, "range_max": 3}, "--range-max"),
                                         ({"absolute_margin": float("nan")}, "--absolute-margin"),
                                         ({"num_negatives": 5, "range_max": 4}, "--num-negatives")])
def test_bad_rules_name_the_option(kwargs, flag):
    pairs, corpus, encode, _ = _setup()
    with pytest.raises(MiningError, match=flag):
        mine(pairs, encode, MiningRules(**kwargs), corpus)


def test_nonfinite_vectors_are_refused():
    pairs, corpus, encode, _ = _setup()
    with pytest.raises(MiningError, match="NaN"):
        mine(pairs, lambda t: encode(t) * np.nan, MiningRules(), corpus)


def test_output_round_trips_through_clear_prepare_pairs(tmp_path):
    pairs, corpus, encode, _ = _setup()
    result = mine(pairs, encode, MiningRules(num_negatives=2), corpus)
    out = tmp_path / "mined.csv"
    write_rows(result, str(out))
    with open(out, encoding="utf-8", newline="") as f:
        assert [tuple(r) for r in csv.reader(f)][1:] == [r[:3] for r in result.rows]
    data = make_binarized(tmp_path / "data", synthetic_sentences(200), synthetic_sentences(20, seed=1))
    run_cli([bin_path("clear-prepare-pairs"), "--train", out, "--data", data, "--out", tmp_path / "bin"])
    summary = json.loads((tmp_path / "bin" / "pairs.json").read_text())
    assert summary["hard_negatives"] is True and summary["splits"]["train"]["pairs_written"] == len(result.rows)
    raw = (tmp_path / "bin" / "raw" / "train.hard_neg").read_text(encoding="utf-8").splitlines()
    assert raw == [r[2] for r in result.rows]


def test_the_command_on_a_trained_checkpoint(tmp_path):
    from embedding_helpers import tiny_checkpoint, write_stsb

    checkpoint, data = tiny_checkpoint(tmp_path / "model")
    stsb = write_stsb(tmp_path / "sts-train.tsv", n=60)
    lines = stsb.read_text().splitlines()
    header = "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2"
    (tmp_path / "train.tsv").write_text("\n".join([header] + lines) + "\n", encoding="utf-8")
    out = tmp_path / "mined.csv"
    log = run_cli(["python", "-m", "fairseq_clear.cli.mine_negatives", "--train", tmp_path / "train.tsv",
                   "--format", "stsb", "--checkpoint", checkpoint, "--data", data, "--out", out, "--cpu",
                   "--num-negatives", "2", "--chunk-size", "7", "--min-score", "-1"]).stdout
    report = json.loads((tmp_path / "mined.json").read_text())
    assert report["counts"]["rows_written"] > 0 and (tmp_path / "mined.png").stat().st_size > 0, log
    assert sum(report["histogram"]["negative"]) == report["counts"]["rows_written"]
    assert "candidates removed by positive: 20" in log and "candidates removed by min_score: 0" in log
    bad = run_cli(["python", "-m", "fairseq_clear.cli.mine_negatives", "--train", tmp_path / "train.tsv",
                   "--checkpoint", checkpoint, "--data", data, "--out", tmp_path / "x.csv", "--range-min", "4",
                   "--range-max", "2"], check=False)
    assert bad.returncode == 2 and "error: --range-max" in bad.stdout
