"""One ``--task clear`` task and model built in-process, and criteria built on them with changed
options, for tests of the criterion's options (no training; the task and model are built once per
module)."""

import torch
from omegaconf import OmegaConf


def build(data, *extra):
    """``(task, model, cfg)`` of ``fairseq-train DATA --task clear --criterion clear *extra`` (tiny model,
    64 tokens, batches of 8)."""
    from harness.runs import build_task

    task, cfg = build_task(data, "--tokens-per-sample", "64", "--batch-size", "8", *extra)
    return task, task.build_model(cfg.model), cfg


def criterion(built, **changes):
    """The task's criterion, its config's options changed by ``changes`` (checked at start-up as usual)."""
    task, _, cfg = built
    options = OmegaConf.create(OmegaConf.to_container(cfg.criterion))
    for key, value in changes.items():
        options[key] = value
    return task.build_criterion(options)


def batch(task, indices):
    """The train split's samples ``indices`` collated into one batch."""
    dataset = task.datasets["train"]
    return dataset.collater([dataset[i] for i in indices])


def forward(criterion, model, sample, seed=0):
    """(logs, the contrastive vectors it compared): one training forward and backward of ``criterion``,
    then the views encoded again under the same seed (the same dropout masks)."""
    model.train()
    torch.manual_seed(seed)
    loss, _, logs = criterion(model, sample)
    loss.backward()
    torch.manual_seed(seed)
    with torch.no_grad():
        z = model(sample["contrastive"]["src_tokens"], contrastive=True)[0]
    return logs, z
