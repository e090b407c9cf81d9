"""``word-rep`` (ESimCSE's word repetition): its rate and positions against a brute-force count of
what each view repeated, its [DEL]/special-token invariants, its length limit, and the option
through --task clear's views."""

import numpy as np
import pytest

from fairseq_clear import augmentations as aug

DEL = 7  # [DEL]'s id in these arrays


def repeated(original, view):
    """Brute force: the positions of ``original`` whose token ``view`` repeats right after it; fails
    unless ``view`` is ``original`` with some tokens each followed by one copy of itself."""
    out, i, positions = list(view), 0, []
    for j, token in enumerate(out):
        if i < len(original) and token == original[i]:
            i += 1
        else:
            assert j > 0 and token == out[j - 1], f"{view} is not {original} with repeated tokens"
            positions.append(i - 1)
    assert i == len(original), f"{view} lost tokens of {original}"
    return positions


def test_the_count_is_uniform_on_the_papers_range_and_the_positions_uniform():
    """dup_len uniform on 0 .. max(2, int(rate·n)) (ESimCSE §3.1), every position equally likely."""
    rng = np.random.default_rng(0)
    original = np.arange(10, 35)  # n = 25 tokens: int(0.32 x 25) = 8
    draws, counts, hits = 6000, np.zeros(9), np.zeros(25)
    for _ in range(draws):
        positions = repeated(original, aug.word_repetition(original, rng, 0.32))
        counts[len(positions)] += 1
        hits[positions] += 1
    assert counts.sum() == draws  # never more than 8
    np.testing.assert_allclose(counts / draws, 1 / 9, atol=0.02)
    np.testing.assert_allclose(hits / draws, 4 / 25, atol=0.025)  # E[dup_len] / n


def test_short_sentences_repeat_up_to_two_tokens_as_in_the_paper():
    rng = np.random.default_rng(1)
    original = np.array([10, 11, 12])  # int(0.32 x 3) = 0: max(2, 0) = 2
    seen = {len(repeated(original, aug.word_repetition(original, rng, 0.32))) for _ in range(300)}
    assert seen == {0, 1, 2}


def test_del_and_special_tokens_are_never_repeated():
    rng = np.random.default_rng(2)
    original = np.array([10, DEL, 11, 2, 12, DEL, 13, 0, 3, 14])  # [DEL]s, a block's </s>, <s>, <unk>
    allowed = {0, 2, 4, 6, 9}
    for _ in range(2000):
        view = aug.word_repetition(original, rng, 1.0, del_idx=DEL)
        assert set(repeated(original, view)) <= allowed
        assert not np.any((view[1:] == DEL) & (view[:-1] == DEL))  # [DEL] runs stay merged
    assert len(aug.word_repetition(np.array([DEL, 2]), rng, 1.0, del_idx=DEL)) == 2


def test_a_view_stays_within_the_models_length():
    rng = np.random.default_rng(3)
    original = np.arange(10, 40)
    for room in (0, 1, 3):
        lengths = {len(aug.word_repetition(original, rng, 1.0, max_len=30 + room)) for _ in range(300)}
        assert max(lengths) == 30 + room


def test_composed_after_a_deletion_the_views_keep_their_invariants():
    rng = np.random.default_rng(4)
    params = aug.AugmentationParams(word_rep_rate=0.5)
    original = np.arange(10, 30)
    for names in (["del-word", "word-rep"], ["word-rep", "del-span"], ["reorder", "word-rep"]):
        fn = aug.build_augmentation(names, params, del_idx=DEL)
        for _ in range(200):
            view = fn(original, rng)
            assert not np.any((view[1:] == DEL) & (view[:-1] == DEL))
            assert (view != DEL).any()
    deleted = aug.build_augmentation(["del-word", "word-rep"], params, del_idx=DEL)(original, rng)
    assert DEL in deleted


def test_the_rate_is_checked_with_the_others():
    with pytest.raises(aug.AugmentationConfigError, match=r"--word-rep-rate must be in \[0, 1\], got 1.5"):
        aug.build_augmentation(["word-rep"], aug.AugmentationParams(word_rep_rate=1.5))


def test_task_views_repeat_within_tokens_per_sample(tiny_data):
    """--augmentations word-rep through --task clear: each view is its sentence with repeated
    tokens, no view longer than --tokens-per-sample (a full-length sentence repeats nothing), and
    the two views of a sentence differ in length in some sentences (the length cue ESimCSE removes)."""
    from harness.runs import build_task

    task, _ = build_task(tiny_data, "--augmentations", "word-rep", "--tokens-per-sample", "24", "--mlm", "off")
    dataset, sentences = task.datasets["train"], task.load_sentences("train")
    differ, full = 0, 0
    for index in range(100):
        body = sentences[index][1:-1].numpy()
        pair = dataset[index]["contrastive"]
        for view in pair:
            assert len(view) <= 24
            repeated(body, view[1:-1].numpy())
        if len(body) == 22:  # at the limit: nothing repeated, nothing cut
            full += 1
            assert all(np.array_equal(view[1:-1].numpy(), body) for view in pair)
        differ += len(pair[0]) != len(pair[1])
    assert full > 0 and differ > 20


def test_the_changed_share_of_a_repeated_view_is_its_repeated_tokens():
    """The augmentation statistics count word-rep's copies (they reported 0% for it: nothing is missing
    from a view that only inserts), and still count deletions as before."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        original = rng.integers(10, 190, size=int(rng.integers(3, 40)))
        view = aug.word_repetition(original, rng, 0.32)
        assert aug.changed_share(original, view) == len(repeated(original, view)) / len(original)
    deleted = np.array([10, DEL, 13, 14])
    assert aug.changed_share(np.array([10, 11, 12, 13, 14]), deleted) == 2 / 5  # [DEL] for two tokens


def test_the_task_logs_the_measured_share_of_word_rep(tiny_data):
    from harness.runs import build_task

    task, _ = build_task(tiny_data, "--augmentations", "word-rep", "--tokens-per-sample", "64", "--mlm", "off")
    sentences = task.load_sentences("train")
    share = task.log_augmentation_shares(sentences)["word-rep"]
    bodies = [sentences[int(i)][1:-1].numpy() for i in np.linspace(0, len(sentences) - 1, 500).astype(int)]
    # E[dup_len] / n = max(2, int(0.32 n)) / 2n per sentence: about 0.16 for long ones, more for short ones
    expected = np.mean([max(2, int(0.32 * len(b))) / 2 / len(b) for b in bodies])
    assert share == pytest.approx(expected, abs=0.03) and share > 0.1


def test_word_rep_on_full_blocks_repeats_nothing_and_says_so(tiny_data, caplog):
    """A block mode fills every row to --tokens-per-sample and a view never grows past it: word-rep repeats
    nothing there (but in the last, shorter block). The start-up log warns, naming the mode, instead of training on unchanged views quietly."""
    from harness.runs import build_task

    task, _ = build_task(tiny_data, "--augmentations", "word-rep", "--tokens-per-sample", "32", "--mlm", "off",
                         "--sample-break-mode", "none")
    with caplog.at_level("WARNING", logger="fairseq_clear.tasks.clear"):
        share = task.log_augmentation_shares(task.load_sentences("train"))["word-rep"]
    assert share < 0.001  # the last, shorter block only
    warned = [r.getMessage() for r in caplog.records if "augmentation word-rep changed" in r.getMessage()]
    assert warned and all("--sample-break-mode none fills rows" in w for w in warned), warned  # (load_dataset logs too)
    # sentences (eos): most rows change, no warning
    caplog.clear()
    task, _ = build_task(tiny_data, "--augmentations", "word-rep", "--tokens-per-sample", "64", "--mlm", "off")
    with caplog.at_level("WARNING", logger="fairseq_clear.tasks.clear"):
        task.log_augmentation_shares(task.load_sentences("train"))
    assert not any("augmentation word-rep changed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("views", ["positive", "both"])
def test_word_rep_repeats_in_the_positive_only_as_esimcse_or_in_both_views(tiny_data, views):
    """ESimCSE's code repeats words in the second view only (the anchor is the sentence itself):
    --word-rep-views positive, the default; both: each view repeats its own tokens."""
    from harness.runs import build_task

    extra = [] if views == "positive" else ["--word-rep-views", "both"]
    task, _ = build_task(tiny_data, "--augmentations", "word-rep", "--tokens-per-sample", "64", "--mlm", "off", *extra)
    dataset, sentences = task.datasets["train"], task.load_sentences("train")
    grown = [0, 0]
    for index in range(100):
        body = sentences[index][1:-1].numpy()
        for v, view in enumerate(dataset[index]["contrastive"]):
            grown[v] += len(repeated(body, view[1:-1].numpy())) > 0
    assert grown[1] > 30
    assert (grown[0] == 0) if views == "positive" else (grown[0] > 30)


def test_an_unknown_views_value_is_refused_in_one_line():
    with pytest.raises(aug.AugmentationConfigError, match="--word-rep-views must be one of positive, both, got 'anchor'"):
        aug.AugmentationParams(word_rep_views="anchor").validate()
