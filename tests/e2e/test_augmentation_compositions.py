"""[DEL] merging holds for every composition and mixture (CLEAR §3.3: "we eliminate the
consecutive token [DEL] into one token"), on random and real sentences; views are never
empty; accepted rates change what their help says."""

import itertools

import numpy as np
import pytest

from fairseq_clear import augmentations as aug

DEL = 3
WORD_STARTS = np.zeros(64, dtype=bool)
WORD_STARTS[10::3] = True
NAMES = [aug.DEL_WORD, aug.DEL_SPAN, aug.REORDER, aug.SUBS]


def _index():
    starts = np.zeros(200, dtype=bool)
    starts[10:200:2] = True
    synonyms = {(w,): [np.array([w + 2]), np.array([w + 4, w + 1])] for w in range(10, 190, 2)}
    return aug.SynonymIndex(starts, synonyms)


def _compositions():
    for r in range(2, 4):
        for combo in itertools.permutations(NAMES, r):
            if aug.DEL_WORD in combo or aug.DEL_SPAN in combo:
                yield ",".join(combo)


def _sentences():
    rng = np.random.default_rng(0)
    return [rng.integers(10, 190, size=n) for n in list(range(1, 40)) + [80, 200]]


def _adjacent_del(tokens):
    return bool(np.any((tokens[1:] == DEL) & (tokens[:-1] == DEL)))


@pytest.mark.parametrize("composition", list(_compositions()))
def test_no_adjacent_del_in_any_composition(composition):
    fn = aug.build_augmentation(aug.parse_augmentations(composition), aug.AugmentationParams(), DEL, _index())
    rng = np.random.default_rng(1)
    for tokens in _sentences():
        for _ in range(5):
            out = fn(tokens, rng)
            assert len(out) > 0, composition
            assert not _adjacent_del(out), (composition, tokens.tolist(), out.tolist())
            assert (out != DEL).any(), "a real token always survives"


def test_no_adjacent_del_in_mixtures():
    mix = aug.parse_mixture("del-word,reorder:0.4;del-span,reorder:0.3;subs,del-word,reorder:0.3")
    fn = aug.build_mixture(mix, aug.AugmentationParams(), DEL, _index())
    rng = np.random.default_rng(2)
    for tokens in _sentences():
        for _ in range(10):
            assert not _adjacent_del(fn(tokens, rng))


def test_reorder_after_deletion_used_to_leave_adjacent_dels():
    """What the merge fixes: the plain steps in sequence, without the final merge."""
    rng = np.random.default_rng(3)
    params = aug.AugmentationParams()
    hits = 0
    for _ in range(200):
        tokens = rng.integers(10, 190, size=20)
        out = aug.reorder(aug.word_deletion(tokens, rng, params.del_word_rate, del_idx=DEL), rng)
        hits += _adjacent_del(out)
    assert hits > 50  # the unmerged sequence has them in most views


@pytest.mark.parametrize("name, expected", [
    (aug.DEL_WORD, 0.7), (aug.DEL_SPAN, 0.25), (aug.REORDER, 0.5),
])
def test_measured_share_matches_the_configured_rate(name, expected):
    fn = aug.build_augmentation([name], aug.AugmentationParams(), DEL, None)
    rng = np.random.default_rng(4)
    shares = [aug.changed_share(t, fn(t, rng)) for t in (rng.integers(10, 190, size=60) for _ in range(300))]
    assert abs(np.mean(shares) - expected) < 0.06, (name, np.mean(shares))


@pytest.mark.parametrize("ratio", [0.05, 0.1, 0.15])
def test_a_larger_span_ratio_never_deletes_less(ratio):
    """del-span at a larger accepted ratio deletes more (0.9 deleted less than 0.5 before)."""
    rng = np.random.default_rng(5)
    tokens = [rng.integers(10, 190, size=40) for _ in range(300)]

    def share(r):
        p = aug.AugmentationParams(del_span_ratio=r)
        fn = aug.build_augmentation([aug.DEL_SPAN], p, DEL, None)
        g = np.random.default_rng(6)
        return np.mean([aug.changed_share(t, fn(t, g)) for t in tokens])

    assert share(ratio) >= share(ratio / 2) - 0.01
    assert abs(share(ratio) - 5 * ratio) < 0.08


@pytest.mark.parametrize("params", [
    dict(del_span_ratio=1.0), dict(del_span_ratio=0.9), dict(del_span_count=1, del_span_ratio=1.0),
    dict(reorder_span_ratio=0.6, reorder_pairs=1), dict(reorder_span_ratio=0.11),
])
def test_values_that_cannot_do_what_they_say_are_refused(params):
    with pytest.raises(aug.AugmentationConfigError, match="expected share"):
        aug.AugmentationParams(**params).validate()


def test_start_up_logs_the_measured_share_and_views_of_real_data_have_no_adjacent_del(tiny_data, tmp_path):
    """Through the real fairseq-train: the start-up log gives each augmentation's measured share."""
    import re

    from helpers import run_cli, train_args

    proc = run_cli(train_args(tiny_data, tmp_path / "save", "--augmentations", "del-span,reorder",
                              max_update=1))
    line = next(l for l in proc.stdout.splitlines() if "measured share of changed tokens" in l)
    shares = dict(re.findall(r"([\w,-]+) ([\d.]+)%", line.split("sentences:")[1]))
    assert set(shares) == {"del-span", "reorder", "del-span,reorder"}, line
    assert 10 < float(shares["del-span"]) < 40 and 25 < float(shares["reorder"]) < 70, line

    # the views the task builds from the corpus: [DEL] runs merged after reorder
    import fairseq_clear  # noqa: F401
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq import options

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(tiny_data), "--user-dir", str(fairseq_clear.__path__[0]),
                                                "--task", "clear", "--arch", "clear_roberta_tiny",
                                                "--criterion", "clear", "--augmentations", "del-word,reorder"])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    views = task.dataset("train")
    del_idx = task.del_idx
    with_del = 0
    for i in range(200):
        rows = views[i]["contrastive"]
        for row in rows if isinstance(rows, (list, tuple)) else [rows]:
            t = row.numpy() if hasattr(row, "numpy") else np.asarray(row)
            assert not _adjacent_del(np.where(t == del_idx, DEL, np.where(t == DEL, -1, t)))
            with_del += bool((t == del_idx).any())
    assert with_del > 300, with_del  # del-word at 0.7 puts [DEL]s in nearly every view
