"""clear-eval-multitask's ensemble (seed 004, Table 2): each task from the checkpoints that have its head."""

import numpy as np
import pytest

from fairseq_clear.evaluation.multitask.scoring import combine, task_metric


def _pred(task, scores, labels):
    return {task: {"scores": np.asarray(scores, dtype=float), "labels": np.asarray(labels)}}


def test_single_task_checkpoints_make_one_row_with_every_task():
    """Three single-task models (the seed's best model per task) ensemble into one full row; before,
    the command stopped with 'the checkpoints share no task head'."""
    sentiment = _pred("sentiment", [[0.9, 0.1], [0.2, 0.8]], [0, 1])
    paraphrase = _pred("paraphrase", [0.7, 0.2], [1, 0])
    sts = _pred("sts", [0.1, 0.9], [1.0, 4.0])
    predictions = [sentiment, paraphrase, sts]
    selection = [{t: task_metric(t, p[t]["scores"], p[t]["labels"]) for t in p} for p in predictions]
    out, chosen = combine(predictions, "per-task", selection)
    assert chosen == {"sentiment": 0, "paraphrase": 1, "sts": 2}
    for i, t in enumerate(("sentiment", "paraphrase", "sts")):
        assert out[t] is predictions[i][t]
    averaged, _ = combine(predictions, "average", [])
    assert set(averaged) == {"sentiment", "paraphrase", "sts"}
    np.testing.assert_allclose(averaged["paraphrase"]["scores"], [0.7, 0.2])


def test_per_task_picks_the_best_of_the_checkpoints_having_the_head():
    full = {**_pred("paraphrase", [0.4, 0.6], [1, 0]), **_pred("sts", [0.2, 0.8], [1.0, 4.0])}
    para_only = _pred("paraphrase", [0.9, 0.1], [1, 0])
    selection = [{"paraphrase": 0.0, "sts": 1.0}, {"paraphrase": 1.0}]
    out, chosen = combine([full, para_only], "per-task", selection)
    assert chosen == {"paraphrase": 1, "sts": 0}
    averaged, _ = combine([full, para_only], "average", [])
    np.testing.assert_allclose(averaged["paraphrase"]["scores"], [0.65, 0.35])
    np.testing.assert_allclose(averaged["sts"]["scores"], [0.2, 0.8])  # only the model with the head


def test_no_head_at_all_is_one_error():
    from fairseq_clear.evaluation.multitask.scoring import MultitaskEvalError

    with pytest.raises(MultitaskEvalError, match="no task head"):
        combine([{}, {}], "per-task", [{}, {}])
