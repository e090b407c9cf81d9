"""Options are resolved once, by the task, where fairseq builds each part; the criterion's
normaliser is one pure function; MLM is one tri-state option."""

import pytest

from helpers import run_cli, train_args


def _mlm_of(proc):
    return "mlm_loss" in proc.stdout


@pytest.mark.parametrize("extra, mlm", [
    ([], True),  # CLEAR: MLM on the sentence
    (["--augmentations", "none"], False),  # SimCSE-unsup: the contrastive loss alone
    (["--augmentations", "none", "--mlm", "on"], True),
    (["--mlm", "off"], False),
])
def test_mlm_auto_is_the_modes_paper_and_a_flag_wins(tiny_data, tmp_path, extra, mlm):
    proc = run_cli(train_args(tiny_data, tmp_path / "save", *extra, "--log-interval", "1", max_update=1))
    assert ("mlm_loss" in proc.stdout) == mlm, proc.stdout[-2000:]
    if "--mlm" not in extra:  # the start-up log says what auto became and whose value it is
        mode = "simcse" if "none" in extra else "clear"
        assert f"task clear: {mode}'s published values for the options not given: --mlm {'on' if mlm else 'off'}" \
            in proc.stdout, proc.stdout[:3000]


def test_no_mlm_is_a_deprecated_alias_that_warns(tiny_data, tmp_path):
    proc = run_cli(train_args(tiny_data, tmp_path / "save", "--no-mlm", "--log-interval", "1", max_update=1))
    assert "--no-mlm is deprecated: pass --mlm off" in proc.stdout
    assert "mlm_loss" not in proc.stdout
    bad = run_cli(train_args(tiny_data, tmp_path / "bad", "--no-mlm", "--mlm", "on", max_update=1), check=False)
    assert bad.returncode != 0 and "--no-mlm (deprecated: --mlm off) contradicts --mlm on" in bad.stdout


def test_the_task_resolves_and_neither_model_nor_criterion_calls_back(tiny_data):
    """No task attribute is written by the model; the criterion reads only the task's Step."""
    from fairseq_clear.tasks.contrastive import ContrastiveTask

    assert not hasattr(ContrastiveTask, "model_args")
    assert not hasattr(ContrastiveTask, "dummy_batch") and not hasattr(ContrastiveTask, "micro_batch")
    from fairseq_clear.models.clear_roberta import ClearRobertaModel
    import inspect

    assert "task." not in inspect.getsource(ClearRobertaModel.build_model).replace("task.source_dictionary", "") \
        .replace("task.max_positions", "").replace('getattr(task, "is_contrastive"', "")
