"""--batch-composition: length-sorted batches (CLEAR, as fairseq's masked_lm) or random
batches (SimCSE, DeCLUTR, pairs); 'auto' picks the mode's paper."""

import numpy as np
import pytest

from helpers import run_cli, train_args


def _task(tiny_data, *extra):
    import fairseq_clear  # noqa: F401
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(tiny_data), "--user-dir", str(fairseq_clear.__path__[0]),
                                                "--arch", "clear_roberta_tiny", "--criterion", "clear",
                                                "--task", "clear", *extra])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    return task


def _one_length_share(task, batch=64):
    dataset = task.dataset("train")
    dataset.set_epoch(1)
    order = dataset.ordered_indices()
    sizes = np.asarray(dataset.sizes if not isinstance(dataset.sizes, list) else dataset.sizes[0])
    batches = [order[i:i + batch] for i in range(0, len(order) - batch + 1, batch)]
    return np.mean([len(set(sizes[b].tolist())) == 1 for b in batches]), np.mean(
        [len(set(sizes[b].tolist())) for b in batches])


@pytest.mark.parametrize("extra, want", [
    ([], "length"),                                   # CLEAR: fairseq masked_lm's order
    (["--augmentations", "none"], "random"),          # SimCSE-unsup
    (["--batch-composition", "random"], "random"),
    (["--augmentations", "none", "--batch-composition", "length"], "length"),
])
def test_composition_of_batches(tiny_data, extra, want):
    task = _task(tiny_data, *extra)
    _, distinct = _one_length_share(task)
    if want == "length":
        assert distinct <= 3.0, distinct   # neighbours in length
    else:
        assert distinct > 5.0, distinct    # all lengths mixed


def test_bad_value_is_refused(tiny_data, tmp_path):
    proc = run_cli(train_args(tiny_data, tmp_path / "s", "--batch-composition", "sorted", max_update=1),
                   check=False)
    assert proc.returncode != 0 and "--batch-composition must be one of auto, length, random" in proc.stdout
