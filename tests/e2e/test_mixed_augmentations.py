"""Mixed augmentations (CLEAR §3.1, future work): each view draws its own composition."""

import numpy as np
import pytest
from scipy import stats

from fairseq_clear import augmentations as aug
from fairseq_clear.keyed_rng import KeyedRNG
from harness.runs import logged
from helpers import run_cli, train_args

DEL = 4


def classify(view, tokens):
    if np.array_equal(view, tokens):
        return "none"
    if (view == DEL).any():
        return "del-word"
    assert sorted(view.tolist()) == sorted(tokens.tolist())  # a permutation: reorder
    return "reorder"


def test_views_draw_compositions_with_the_configured_probabilities():
    mixture = aug.parse_mixture("none:0.2;reorder:0.3;del-word:0.5")
    mixed = aug.build_mixture(mixture, aug.AugmentationParams(), del_idx=DEL)
    keyed = KeyedRNG()
    counts = {"none": 0, "reorder": 0, "del-word": 0}
    pairs = np.zeros((3, 3))
    names = list(counts)
    for i in range(3000):
        tokens = np.arange(10, 10 + 10 + i % 30)  # distinct tokens: reorder always shows
        drawn = []
        for view in (1, 2):
            kind = classify(mixed(tokens, keyed(1, 1, i, view)), tokens)
            counts[kind] += 1
            drawn.append(names.index(kind))
        pairs[drawn[0], drawn[1]] += 1
    observed = [counts[k] for k in names]
    expected = [0.2 * 6000, 0.3 * 6000, 0.5 * 6000]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # and a different mixture is rejected by the same test (it has power)
    assert stats.chisquare(observed, [0.3 * 6000, 0.2 * 6000, 0.5 * 6000]).pvalue < 1e-6
    # the two views of a sentence draw independently
    outer = np.outer(pairs.sum(1), pairs.sum(0)) / pairs.sum()
    assert stats.chisquare(pairs.ravel(), outer.ravel(), ddof=4).pvalue > 1e-3
    assert pairs[0, 0] > 0 and pairs[0, 2] > 0  # identical and different compositions both occur


def test_zero_probability_entries_are_never_drawn():
    mixed = aug.build_mixture(aug.parse_mixture("none:0;reorder:1"), aug.AugmentationParams(), DEL)
    keyed = KeyedRNG()
    tokens = np.arange(10, 40)
    assert all(not np.array_equal(mixed(tokens, keyed(0, 1, i, 1)), tokens) for i in range(500))


@pytest.mark.parametrize("spec, message", [
    ("del-word", "needs a probability"),
    ("del-word:x", "is not a number"),
    ("del-word:-1;none:1", "negative"),
    ("none:0", "no composition with a positive probability"),
    ("shuffle:1", "unknown augmentation"),
])
def test_bad_mixtures_are_refused_naming_the_option(spec, message):
    with pytest.raises(aug.AugmentationConfigError, match="--augmentation-mix|--augmentations") as e:
        aug.parse_mixture(spec)
    assert message in str(e.value)


def build_task(data, mix):
    import fairseq_clear  # noqa: F401
    from fairseq_clear.tasks.clear import ClearConfig, ClearTask

    return ClearTask.setup_task(ClearConfig(data=str(data), seed=1, tokens_per_sample=64,
                                            augmentation_mix=mix))


def test_task_views_follow_the_mixture(tiny_data):
    task = build_task(tiny_data, "none:0.3;del-word:0.7")
    task.load_dataset("train")
    views = task.dataset("train").dataset.defn["contrastive"]
    identity = both = 0
    n = len(views)
    for i in range(n):
        body = views.dataset[i][1:-1].numpy()
        same = [np.array_equal(v[1:-1].numpy(), body) for v in views[i]]
        for v, s in zip(views[i], same):
            assert s or (v.numpy() == task.del_idx).any()  # identity, or del-word's [DEL]
        identity += sum(same)
        both += all(same)
    assert n == 600
    assert stats.binomtest(identity, 2 * n, 0.3).pvalue > 1e-3
    assert stats.binomtest(both, n, 0.09).pvalue > 1e-3  # independent draws: 0.3 · 0.3


def test_fairseq_train_with_mixed_augmentations(tiny_data, tmp_path):
    out = run_cli(train_args(tiny_data, tmp_path / "ckpt", "--augmentation-mix",
                             "del-word:0.5;reorder,del-span:0.3;none:0.2", max_update=6)).stdout
    records = logged(out)
    assert len(records) == 6 and "cl_loss" in records[0] and "mlm_loss" in records[0]

    proc = run_cli(train_args(tiny_data, tmp_path / "bad", "--augmentation-mix", "del-word:0.5;oops:1"),
                   check=False)
    assert proc.returncode != 0 and "unknown augmentation 'oops'" in proc.stdout
