"""clear-eval-sts --protocol senteval: the original SentEval's STS numbers (CLEAR's Table 2),
held to SentEval's own code (tests/support/data/senteval_relatedness_reference.json, made by
scripts/senteval_reference.py from SentEval's senteval/sick.py, sts.py and tools/relatedness.py)."""

import json
import os

import numpy as np
import pytest
import torch

from embedding_helpers import write_senteval_tree
from senteval_reference_data import toy_relatedness

from fairseq_clear.evaluation.sts import relatedness as sr
from fairseq_clear.evaluation.sts.scoring import evaluate_sts

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "support", "data", "senteval_relatedness_reference.json")


def _splits(kind):
    data, vectors = toy_relatedness(kind)
    return {split: (np.stack([vectors[s] for s in s1]), np.stack([vectors[s] for s in s2]), y, s1, s2)
            for split, (s1, s2, y) in data.items()}


@pytest.mark.parametrize("kind", ["stsb", "sick"])
def test_the_regressor_gives_senteval_s_numbers_on_a_fixed_embedding(kind):
    with open(REFERENCE, encoding="utf-8") as f:
        ref = json.load(f)["cases"][kind]
    splits = _splits(kind)
    np_state, torch_state = np.random.get_state()[1].copy(), torch.get_rng_state().clone()
    ours = sr.evaluate_relatedness(splits)
    # the same test predictions (in SentEval's sorted order), hence the same scores
    order = sr.senteval_order(*[splits["test"][k] for k in (3, 4, 2)])
    feats = sr.pair_features(splits["test"][0][order], splits["test"][1][order])
    assert len(ref["yhat"]) == len(feats)
    assert ours["pearson"] == pytest.approx(ref["pearson"] * 100, abs=1e-3)
    assert ours["spearman"] == pytest.approx(ref["spearman"] * 100, abs=1e-3)
    assert ours["dev_pearson"] == pytest.approx(ref["devpearson"] * 100, abs=1e-3)
    assert ours["mse"] == pytest.approx(ref["mse"], abs=1e-4)
    # the global RNGs are untouched (SentEval seeds them; we do not)
    assert (np.random.get_state()[1] == np_state).all() and torch.equal(torch.get_rng_state(), torch_state)


def test_label_encoding_is_tai_et_al_s_and_its_expectation_is_the_score():
    y = np.array([1.0, 3.4, 4.8, 5.0])
    encoded = sr.encode_labels(y)
    assert encoded[1].tolist() == pytest.approx([0, 0, 0.6, 0.4, 0])
    assert encoded @ np.arange(1, 6) == pytest.approx(y)
    assert encoded.sum(1) == pytest.approx(1.0)
    # STS-B's scores below 1 go through the same code as in SentEval: 0.4 -> 0.4 on class 1 only
    np.testing.assert_allclose(sr.encode_labels([0.4, 0.0]), [[0.4, 0, 0, 0, 0], [0, 0, 0, 0, 0]], atol=1e-7)


def test_senteval_sorts_each_split_by_words_then_score():
    order = sr.senteval_order(["a b", "a", "a", "c d e"], ["x", "x y", "x", "x"], [1.0, 2.0, 0.5, 3.0])
    assert order.tolist() == [2, 1, 0, 3]


def test_a_better_embedding_scores_higher_and_seeds_matter():
    splits = _splits("sick")
    good = sr.evaluate_relatedness(splits)
    noisy = {k: (a + np.random.RandomState(1).normal(0, 3, a.shape).astype(np.float32), b, y, s1, s2)
             for k, (a, b, y, s1, s2) in splits.items()}
    assert sr.evaluate_relatedness(noisy)["pearson"] < good["pearson"] - 10
    assert sr.evaluate_relatedness(splits, seed=2)["pearson"] != good["pearson"]


def test_protocol_senteval_reports_subset_means_and_the_regressor(tmp_path):
    tree = write_senteval_tree(tmp_path / "sts")
    rng = np.random.default_rng(0)
    cache = {}

    def encoder(sentences):
        return np.stack([cache.setdefault(s, rng.normal(size=8).astype(np.float32)) for s in sentences])

    res = evaluate_sts({"m": encoder}, str(tree), protocol="senteval", align_split="none")["m"]["callable"]
    simcse = evaluate_sts({"m": encoder}, str(tree), align_split="none")["m"]["callable"]
    assert set(res["tables"]) == {"simcse", "senteval"}
    for year in ("STS12", "STS13", "STS14", "STS15", "STS16"):
        task = res["tasks"][year]
        assert res["table"][year] == pytest.approx(task["wmean"]) == pytest.approx(task["senteval"]["spearman"])
        assert res["tables"]["simcse"][year] == pytest.approx(task["spearman"])
    for t in ("STS-B", "SICK-R"):
        assert res["table"][t] == pytest.approx(res["tasks"][t]["senteval"]["spearman"])
        assert res["tasks"][t]["senteval"]["train_pairs"] > 0
    assert res["tables"]["simcse"] == pytest.approx(simcse["table"], nan_ok=True)
    assert res["table"]["Avg"] == pytest.approx(np.mean([v for k, v in res["table"].items() if k != "Avg"]))


def test_the_model_card_table_stays_the_cosine_one_for_a_senteval_report(tmp_path):
    from fairseq_clear.export.model_card import read_sts_table

    report = {"results": {"mean": {"table": {"STS-B": 90.0, "Avg": 90.0},
                                   "tables": {"simcse": {"STS-B": 80.0, "Avg": 80.0},
                                              "senteval": {"STS-B": 90.0, "Avg": 90.0}}}}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    assert read_sts_table(str(path)) == {"STS-B": 80.0, "Avg": 80.0}
