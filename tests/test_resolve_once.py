"""Options are resolved once, by the task, where fairseq builds each part; the criterion's
normaliser is one pure function; MLM is one tri-state option."""

import pytest
import torch

from fairseq_clear.criterions.clear import weighted_loss
from helpers import run_cli, train_args


@pytest.mark.parametrize("masked, anchors", [(40, 16), (7, 3), (0, 16), (0, 0)])
def test_weighted_loss_is_the_docstrings_formula(masked, anchors):
    mlm, cl, lam = torch.tensor(12.5), torch.tensor(3.25), 0.7
    got = weighted_loss(mlm, cl, lam, masked, anchors)
    # masked > 0: mlm + λ·cl·S/V; else mlm + λ·cl
    expected = 12.5 + lam * 3.25 * (masked / anchors if masked > 0 else 1.0)
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_gradient_over_fairseqs_normaliser_is_the_papers_loss():
    """Divided by the summed sample_size (S masked tokens), the gradient of the returned loss is
    that of mean MLM + λ·mean CL."""
    w = torch.tensor(2.0, requires_grad=True)
    lam = 0.3

    def terms():
        return w * torch.arange(1.0, 6.0), w ** 2 * torch.tensor([0.5, 1.5, 4.0])

    token_losses, anchor_losses = terms()
    (weighted_loss(token_losses.sum(), anchor_losses.sum(), lam, masked=5, anchors=3) / 5).backward()
    grad = w.grad.clone()
    w.grad = None
    token_losses, anchor_losses = terms()
    (token_losses.mean() + lam * anchor_losses.mean()).backward()
    assert float(grad) == pytest.approx(float(w.grad))


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
