"""--sts-validation: STS-B dev Spearman at every validation, usable as the best-checkpoint metric."""

import pytest
import torch

from embedding_helpers import write_stsb
from harness.runs import logged
from helpers import run_cli, train_args


def valid_records(output):
    return logged(output, "valid")


def test_sts_b_spearman_is_logged_and_keeps_checkpoint_best(tiny_data, tmp_path):
    dev = write_stsb(tmp_path / "sts-dev.csv", n=60)
    save = tmp_path / "ckpt"
    out = run_cli(train_args(
        tiny_data, save,
        "--sts-validation", tmp_path,  # the directory holding sts-dev.csv
        "--best-checkpoint-metric", "sts_b_spearman", "--maximize-best-checkpoint-metric",
        "--validate-interval-updates", "4", "--save-interval-updates", "4",
        "--lr", "3e-3",
        max_update=16, validate=True,
    )).stdout
    assert f"STS validation: 60 pairs from {dev}" in out
    records = valid_records(out)
    scores = {int(r["valid_num_updates"]): float(r["valid_sts_b_spearman"]) for r in records}
    assert set(scores) >= {4, 8, 12, 16}, records
    assert all(-100 <= v <= 100 for v in scores.values())
    assert len(set(scores.values())) > 1, "the metric should change as the model trains"
    assert float(records[-1]["valid_best_sts_b_spearman"]) == pytest.approx(max(scores.values()), abs=0.01)

    import fairseq_clear  # noqa: F401
    from fairseq_clear.checkpoint_safety import safe_load

    best = safe_load(save / "checkpoint_best.pt")  # weights_only=True
    assert type(best["extra_state"]["best"]) is float
    assert best["extra_state"]["best"] == pytest.approx(max(scores.values()), abs=0.01)
    best_update = max(scores, key=lambda u: (scores[u], -u))  # fairseq keeps the first of equals
    assert best["optimizer_history"][-1]["num_updates"] == best_update
    last = safe_load(save / "checkpoint_last.pt")
    assert last["optimizer_history"][-1]["num_updates"] == 16


def test_bad_sts_validation_fails_at_start_up(tiny_data, tmp_path):
    proc = run_cli(train_args(tiny_data, tmp_path / "c", "--sts-validation", tmp_path / "missing.csv",
                              max_update=1, validate=True), check=False)
    assert proc.returncode != 0 and "--sts-validation: cannot read" in proc.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("g\tf\ty\t1\tnot-a-score\ta\tb\n")
    proc = run_cli(train_args(tiny_data, tmp_path / "c", "--sts-validation", bad,
                              "--sts-validation-pooling", "mean", max_update=1, validate=True), check=False)
    assert proc.returncode != 0 and f"{bad}:1" in proc.stdout


def test_score_survives_summed_logging_outputs():
    """fairseq sums logging outputs over batches and ranks: the sum/count pair keeps the value."""
    from fairseq import metrics

    from fairseq_clear.tasks.sts_validation import METRIC, StsValidationMixin

    class Base:
        def reduce_metrics(self, logging_outputs, criterion):
            pass

    class Task(StsValidationMixin, Base):
        pass

    task = Task()
    task._sts_score = 42.5
    logs = [{"_sts_b_spearman_sum": 42.5, "_sts_b_spearman_count": 1.0}] * 3
    summed = {k: torch.tensor(sum(log[k] for log in logs)) for k in logs[0]}  # as 3 ranks all-reduced
    with metrics.aggregate(new_root=True) as agg:
        task.reduce_metrics([summed], None)
        task.reduce_metrics(logs, None)
    value = agg.get_smoothed_values()[METRIC]
    assert value == 42.5 and type(value) is float


def _summary(output):
    lines = [line for line in output.splitlines() if "STS-B dev Spearman: start" in line]
    assert len(lines) == 1, output[-4000:]
    return lines[0]


def test_resumed_run_keeps_the_start_and_every_score(tiny_data, tmp_path):
    """Stopped at update 4 and resumed to 8: the summary line of the resumed run names the original
    start and the scores of every interval, those before the stop included; the checkpoint holds
    them as plain Python types (weights_only=True)."""
    write_stsb(tmp_path / "sts-dev.csv", n=60)
    save = tmp_path / "ckpt"

    def train(max_update):
        return run_cli(train_args(
            tiny_data, save, "--sts-validation", tmp_path,
            "--best-checkpoint-metric", "sts_b_spearman", "--maximize-best-checkpoint-metric",
            "--validate-interval-updates", "2", "--save-interval-updates", "2", "--lr", "3e-3",
            max_update=max_update, validate=True,
        )).stdout

    first = _summary(train(4))
    start = first.split("start ")[1].split(" ")[0]
    assert "every score: 0: " + start in first and ", 4: " in first, first

    import fairseq_clear  # noqa: F401
    from fairseq_clear.checkpoint_safety import safe_load

    record = safe_load(save / "checkpoint_last.pt")["extra_state"]["ClearTask"]["sts_validation"]
    assert record["start"] == float(start) and [u for u, _ in record["history"]] == [0, 2, 4], record

    second = _summary(train(8))
    assert f"STS-B dev Spearman: start {start} -> best" in second, second
    every = second.split("every score: ")[1]
    assert [int(item.split(":")[0]) for item in every.split(", ")] == [0, 2, 4, 6, 8], second
    assert every.startswith(first.split("every score: ")[1]), (first, second)  # the first run's scores kept
