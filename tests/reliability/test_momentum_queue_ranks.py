"""ESimCSE's momentum queue across gloo ranks (--queue-size with GradCache chunks): after two earlier
batches, the criterion's loss equals a brute-force float64 computation with the queued vectors as extra
columns (the momentum encoder and the FIFO queue written out by hand, queued duplicates of the anchor's
pair left out), on 1 and on 2 ranks, and every rank holds the same queue, bit for bit."""

import math

import pytest
import torch

from harness import dist_check  # tests/support (tests/conftest.py)

pytestmark = pytest.mark.xdist_group("test_momentum_queue_ranks")

TAU, SIZE, MOMENTUM = 0.05, 10, 0.995
COPIES = [(1, 4), (5, 0)]  # earlier rows that repeat a pair of the last batch (on both ranks' sides)
OPTIONS = {"queue_size": SIZE, "queue_momentum": MOMENTUM, "mask_duplicates": True, "double": True,
           "queue_batches": 2, "queue_copies": COPIES}
CASES = [
    ([4, 3], "nt-xent", "criterion", {**OPTIONS, "contrastive_chunk_size": 3}),
    ([4, 3], "simcse", "criterion", {**OPTIONS, "contrastive_chunk_size": 2}),
]


def _text(row):
    return tuple(row[row.ne(dist_check.PAD)].tolist())


def _cos(u, v):
    return float(u @ v / (u.norm() * v.norm()))


def _moved(state, factor):
    return {k: v * factor for k, v in state.items()}


def hand_queue(total, form, batches):
    """(queue before the last batch, its pairs' texts, queue after it): the momentum encoder is the
    model at the first batch, then θ_m <- m·θ_m + (1 - m)·θ at each batch before encoding; after each
    batch its positives, encoded by it, are appended and the last SIZE kept."""
    model = dist_check.TinyModel().double()
    theta0 = {k: v.clone() for k, v in model.state_dict().items()}
    hard = form == "simcse"
    all_batches = [dist_check.earlier_batch(total, hard, OPTIONS, e) for e in range(batches)]
    all_batches.append(dist_check.global_batch(total, hard))
    ema, queued, texts, before = None, [], [], None
    for j, batch in enumerate(all_batches):
        live = _moved(theta0, dist_check.MOVE ** j)
        ema = live if ema is None else {k: MOMENTUM * ema[k] + (1 - MOMENTUM) * live[k] for k in ema}
        if j == len(all_batches) - 1:
            before = (torch.stack(queued[-SIZE:]), texts[-SIZE:])
        model.load_state_dict(ema)
        with torch.no_grad():
            positives = model(batch["views"][1], contrastive=True)[0]
        queued += list(positives)
        texts += [{_text(batch["views"][0][i]), _text(batch["views"][1][i])} for i in range(total)]
    return before[0], before[1], torch.stack(queued[-SIZE:])


def brute_force(total, form, queue, queue_texts, mask=True):
    """The summed contrastive loss of the last batch under the model after the earlier batches."""
    model = dist_check.TinyModel().double()
    model.load_state_dict(_moved(model.state_dict(), dist_check.MOVE ** OPTIONS["queue_batches"]))
    batch = dist_check.global_batch(total, form == "simcse")
    with torch.no_grad():
        z = [model(v, contrastive=True)[0] for v in batch["views"]]
    pair_texts = [{_text(batch["views"][0][i]), _text(batch["views"][1][i])} for i in range(total)]
    if form == "nt-xent":
        views = torch.cat([z[0], z[1]])
        anchors = [(views[a], views[(a + total) % (2 * total)],
                    [views[k] for k in range(2 * total) if k != a], a % total) for a in range(2 * total)]
    else:
        anchors = [(z[0][i], z[1][i], list(z[1]) + list(z[2]), i) for i in range(total)]
    out = 0.0
    for x, positive, candidates, pair in anchors:
        columns = candidates + [q for q, t in zip(queue, queue_texts) if not (mask and t & pair_texts[pair])]
        out += math.log(sum(math.exp(_cos(x, c) / TAU) for c in columns)) - _cos(x, positive) / TAU
    return out


@pytest.fixture(scope="module")
def two_ranks():
    return dist_check.run(CASES)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_one_and_two_ranks_equal_the_brute_force_with_queued_columns(two_ranks, case):
    sizes, form, level, options = CASES[case]
    total = sum(sizes)
    queue, queue_texts, after = hand_queue(total, form, options["queue_batches"])
    expected = brute_force(total, form, queue, queue_texts)
    assert abs(expected - brute_force(total, form, queue, queue_texts, mask=False)) > 1e-6  # copies are masked
    one = dist_check.reference(sizes, form, level, options)
    got = two_ranks[case]
    for result in (one, got):
        assert result["cl_loss"] == pytest.approx(expected, rel=1e-10)
        torch.testing.assert_close(result["queue"], after, rtol=1e-12, atol=1e-12)
    assert got["queues_equal"]  # gathered in rank order: the same queue on every rank
    assert got["loss_over_size"] == pytest.approx(one["loss_over_size"], rel=1e-6)
    for k, grad in one["grads"].items():
        assert torch.allclose(got["grads"][k], grad, rtol=1e-6, atol=1e-9), k
