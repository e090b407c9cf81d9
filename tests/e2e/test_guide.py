"""--guide-model (GISTEmbed's guide) in a real fairseq-train run: masked counts logged per update,
the guide neither trained nor saved, and a resumed run bit-exact with an uninterrupted one."""

import pytest

from harness.runs import load_state, logged, max_abs_diff
from helpers import make_binarized, run_cli, synthetic_sentences, train_args


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    work = tmp_path_factory.mktemp("guide")
    data = make_binarized(work / "corpus", synthetic_sentences(300, seed=2), synthetic_sentences(20, seed=4))
    plain = run_cli(train_args(data, work / "guide", max_update=2)).stdout
    (work / "plain.log").write_text(plain)
    return work, data, work / "guide"


def test_a_run_without_a_guide_logs_no_guide_count(setup):
    records = logged((setup[0] / "plain.log").read_text())
    assert records and not any("guide_masked" in r for r in records)


def _guided(data, save, guide, updates, *extra):
    return train_args(data, save, "--guide-model", guide, "--guide-checkpoint", "checkpoint_last.pt",
                      "--guide-margin", "0.05", "--mask-duplicates", *extra, max_update=updates)


def test_guide_masks_are_logged_and_the_guide_is_not_saved_and_resume_is_bit_exact(setup):
    work, data, guide = setup
    before = load_state(guide / "checkpoint_last.pt")["model"]
    out = run_cli(_guided(data, work / "full", guide, 4)).stdout
    records = logged(out)
    assert len(records) == 4 and all("guide_masked" in r for r in records), out[-3000:]
    assert any(float(r["guide_masked"]) > 0 for r in records)
    state = load_state(work / "full" / "checkpoint_last.pt")
    plain = load_state(guide / "checkpoint_last.pt")
    assert set(state["model"]) == set(plain["model"])  # no guide weights in our checkpoint
    assert not state.get("criterion")
    # the guide's own checkpoint is untouched
    assert max(max_abs_diff(before, load_state(guide / "checkpoint_last.pt")["model"]).values()) == 0.0
    # resume: 2 updates, then 2 more, equals 4 in one go
    run_cli(_guided(data, work / "resumed", guide, 2))
    run_cli(_guided(data, work / "resumed", guide, 4))
    resumed = load_state(work / "resumed" / "checkpoint_last.pt")["model"]
    assert max(max_abs_diff(state["model"], resumed).values()) == 0.0


def test_a_guide_with_another_dictionary_is_refused(setup, tmp_path):
    work, data, guide = setup
    other = make_binarized(tmp_path / "other", [f"zq{i} xv{i} wk" for i in range(200)], ["zq xv"] * 10, vocab_size=100)
    proc = run_cli(_guided(other, tmp_path / "save", guide, 1), check=False)
    assert proc.returncode != 0 and "--guide-model" in proc.stdout and "dict.txt" in proc.stdout
