"""Each mode trains with its paper's values when no flag says otherwise; a flag still wins."""

import re

import pytest

from helpers import run_cli, train_args

LINE = re.compile(r"(model|criterion): (\w+)'s published values for the options not given: (.*)")


def _in_force(stdout):
    found = {}
    for what, mode, values in LINE.findall(stdout):
        found["mode"] = mode
        for k, v in re.findall(r"--([\w-]+) (\S+?)(?:,|$)", values):
            found[k] = v
    return found


@pytest.mark.parametrize("extra, mode, expected", [
    ([], "clear", {"sentence-pooling": "cls", "projection-layers": "2", "temperature": "0.1", "loss-form": "nt-xent"}),
    (["--augmentations", "none"], "simcse",
     {"sentence-pooling": "cls", "projection-layers": "1", "projection-output-activation-fn": "tanh",
      "temperature": "0.05", "loss-form": "simcse"}),
    (["--task", "declutr"], "declutr",
     {"sentence-pooling": "mean", "projection-layers": "0", "temperature": "0.05", "loss-form": "nt-xent"}),
])
def test_a_task_alone_trains_with_its_papers_values(tiny_data, tmp_path, extra, mode, expected):
    proc = run_cli(train_args(tiny_data, tmp_path / "save", *extra, max_update=1))
    found = _in_force(proc.stdout)
    assert found.pop("mode") == mode, proc.stdout[-3000:]
    for k, v in expected.items():
        assert found.get(k) == v, (k, found)

    from fairseq_clear.checkpoint_safety import safe_load

    state = safe_load(tmp_path / "save" / "checkpoint_last.pt")
    model = state["cfg"]["model"]
    get = (lambda c, k: c[k] if isinstance(c, dict) else getattr(c, k))
    # the model's resolved values are saved with it (the hub's embed() default pooling)
    assert get(model, "sentence_pooling") == expected["sentence-pooling"]
    assert get(model, "projection_layers") == int(expected["projection-layers"])
    has_head = any(k.startswith("projection_head.") for k in state["model"])
    assert has_head == (expected["projection-layers"] != "0")


def test_an_explicit_flag_wins(tiny_data, tmp_path):
    proc = run_cli(train_args(tiny_data, tmp_path / "save", "--task", "declutr", "--temperature", "0.2",
                              "--sentence-pooling", "cls", max_update=1))
    found = _in_force(proc.stdout)
    assert "temperature" not in found and "sentence-pooling" not in found
    assert found["projection-layers"] == "0" and found["loss-form"] == "nt-xent"


def test_clsr_mode_over_a_frozen_encoder(tiny_data, tmp_path):
    from fairseq_clear.tasks.contrastive_pairs import ContrastivePairsTask

    class Args:
        freeze_encoder = True

    task = ContrastivePairsTask.__new__(ContrastivePairsTask)  # the task's rule, without building data
    assert task.paper_mode(Args()) == "clsr"
    assert task.paper_mode(None) == "simcse"
