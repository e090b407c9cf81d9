"""NT-Xent numerics inside the real task and trainer: a one-sentence batch, and a NaN loss stops fairseq's trainer before the weights."""

import logging
import pytest
import torch


def test_criterion_on_a_batch_of_one_sentence(tiny_data):
    """The whole criterion with one sentence: finite loss, cl_loss 0, MLM still trains."""
    from harness.runs import build_task

    task, cfg = build_task(tiny_data, "--tokens-per-sample", "64")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    dataset = task.dataset("train")
    sample = dataset.collater([dataset[0]])
    model.train()
    loss, sample_size, log = criterion(model, sample)
    assert torch.isfinite(loss)
    assert float(log["cl_loss"]) == 0.0 and log["cl_anchors"] == 2
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_nan_loss_stops_the_trainer_before_the_weights(tiny_data, tmp_path, monkeypatch, caplog, plugin_run):
    """On CPU in fp32 fairseq raises FloatingPointError('gradients are Nan/Inf') and runs its
    NanDetector; the optimizer step is not taken, so no NaN reaches the weights."""
    from fairseq.trainer import Trainer

    from harness.runs import build_task

    task, cfg = build_task(
        tiny_data, "--tokens-per-sample", "64", "--optimizer", "adam", "--lr", "1e-3",
        "--lr-scheduler", "fixed", "--batch-size", "8", "--save-dir", str(tmp_path),
    )
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    dataset = task.dataset("train")
    sample = dataset.collater([dataset[i] for i in range(8)])

    assert trainer.train_step([sample]) is not None  # a normal step first
    before = {k: v.clone() for k, v in model.state_dict().items()}

    real_forward = type(criterion).forward

    def nan_forward(self, model, sample, reduce=True):
        loss, size, log = real_forward(self, model, sample, reduce)
        return loss * float("nan"), size, log

    monkeypatch.setattr(type(criterion), "forward", nan_forward)
    with caplog.at_level(logging.INFO), pytest.raises(FloatingPointError, match="Nan/Inf"):
        trainer.train_step([sample])
    # the NanDetector's post-mortem names where the NaN is (the plugin's compat fix)
    reports = [r.getMessage() for r in caplog.records if "detected in output of" in r.getMessage()]
    assert reports and "backward" in reports[0], [r.getMessage() for r in caplog.records][-5:]
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "a NaN step changed the weights"
    assert all(torch.isfinite(v).all() for v in after.values() if v.is_floating_point())
    assert (tmp_path / "crash.pt").is_file()  # fairseq's post-mortem checkpoint
