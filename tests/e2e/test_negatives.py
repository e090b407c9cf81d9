"""False negatives (duplicates, a guide model) and Matryoshka, against brute-force computations.

* Masking: a batch with planted duplicates gives, for every anchor, the loss of the batch without
  the duplicate columns (float64; the loss functions, then the whole criterion on 1 and 2 gloo
  ranks with GradCache chunks).
* The guide filter's masked set equals a brute-force loop over anchors and candidates.
* Matryoshka: the loss is the weighted sum of the per-size losses computed separately, and
  GradCache (and 2 ranks) gives the gradients of the plain computation.
"""

import math

import pytest
import torch

from fairseq_clear import losses, negatives

from harness import dist_check  # tests/support (tests/conftest.py)

TAU = 0.1


def _unit(x):
    return x / x.norm(dim=1, keepdim=True)


def _brute_nt_xent(z1, z2, texts, tau, dims=None, weights=None):
    """CLEAR eq. 1-2 anchor by anchor, leaving out the columns of every other pair that shares a
    text with the anchor's pair (``texts[i]``: a set)."""
    m = z1.size(0)
    total = 0.0
    for d, w in zip(dims or [z1.size(1)], weights or [1.0]):
        z = _unit(torch.cat([z1, z2])[:, :d].double())
        for a in range(2 * m):
            i, t = a % m, (a + m) % (2 * m)
            dup = {j for j in range(m) if j != i and texts[i] & texts[j]}
            kept = [k for k in range(2 * m) if k != a and k % m not in dup]
            logits = torch.stack([z[a] @ z[k] / tau for k in kept])
            total += w * float(torch.logsumexp(logits, 0) - z[a] @ z[t] / tau)
    return total


def _brute_simcse(z1, z2, z3, texts, hard_texts, tau, hard_weight=0.0, dims=None, weights=None):
    m = z1.size(0)
    total = 0.0
    for d, w in zip(dims or [z1.size(1)], weights or [1.0]):
        a, p = _unit(z1[:, :d].double()), _unit(z2[:, :d].double())
        h = None if z3 is None else _unit(z3[:, :d].double())
        for i in range(m):
            logits = [a[i] @ p[j] / tau for j in range(m) if j == i or not texts[i] & texts[j]]
            if h is not None:
                logits += [a[i] @ h[j] / tau + (hard_weight if j == i else 0.0)
                           for j in range(m) if hard_texts[j] not in texts[i]]
            total += w * float(torch.logsumexp(torch.stack(logits), 0) - a[i] @ p[i] / tau)
    return total


def _planted(m, hard, seed=0):
    """Texts of m pairs with planted duplicates: pair 3 repeats pair 0, pair 4 shares pair 1's
    anchor, pair 5's positive is pair 2's anchor, and (with hard negatives) pair 6's hard
    negative is pair 0's positive."""
    texts = [[f"a{i}", f"p{i}", f"h{i}"] for i in range(m)]
    texts[3] = list(texts[0])
    texts[4][0] = texts[1][0]
    texts[5][1] = texts[2][0]
    if hard:
        texts[6][2] = texts[0][1]
    keys = torch.tensor([[negatives.token_key([ord(c) for c in t]) for t in row] for row in texts])
    g = torch.Generator().manual_seed(seed)
    z = [torch.randn(m, 8, generator=g, dtype=torch.float64) for _ in range(3)]
    return texts, keys, z


@pytest.mark.parametrize("dims,weights", [(None, None), ([8, 4, 2], [1.0, 0.5, 2.0])])
def test_nt_xent_with_duplicates_masked_equals_the_batch_without_their_columns(dims, weights):
    texts, keys, (z1, z2, _) = _planted(8, hard=False)
    rows = torch.arange(8)
    mask = negatives.duplicate_mask(keys[:, :2], rows, "nt-xent")
    loss, _ = losses.nt_xent(z1, z2, TAU, rows, negative_mask=mask, dims=dims, dim_weights=weights)
    sets = [set(t[:2]) for t in texts]
    assert loss.item() == pytest.approx(_brute_nt_xent(z1, z2, sets, TAU, dims, weights), rel=1e-12)
    # the masking changed something: the plain loss differs
    assert losses.nt_xent(z1, z2, TAU, rows)[0].item() != pytest.approx(loss.item(), rel=1e-6)
    # counted: pairs 0/3 (both ways), 1/4, 2/5; two columns each, two directions
    assert int(mask.sum()) == 3 * 2 * 2 * 2


@pytest.mark.parametrize("hard_weight", [0.0, 0.7])
@pytest.mark.parametrize("dims,weights", [(None, None), ([8, 3], [1.0, 1.0])])
def test_simcse_with_duplicates_masked_equals_the_batch_without_their_columns(hard_weight, dims, weights):
    texts, keys, (z1, z2, z3) = _planted(8, hard=True)
    rows = torch.arange(8)
    mask = negatives.duplicate_mask(keys[:, :2], rows, "simcse", keys[:, 2])
    loss, _ = losses.simcse(z1, z2, TAU, rows, z3, hard_weight, negative_mask=mask, dims=dims, dim_weights=weights)
    sets = [set(t[:2]) for t in texts]
    want = _brute_simcse(z1, z2, z3, sets, [t[2] for t in texts], TAU, hard_weight, dims, weights)
    assert loss.item() == pytest.approx(want, rel=1e-12)


def test_masks_never_remove_the_positive_and_all_masked_gives_zero():
    z1 = torch.randn(3, 4, dtype=torch.float64)
    everything = torch.ones(6, 6, dtype=torch.bool)
    loss, _ = losses.nt_xent(z1, z1 + 0.1, TAU, negative_mask=everything)
    assert loss.item() == 0.0  # only the positive is left: -log 1
    loss, _ = losses.simcse(z1, z1 + 0.1, TAU, negative_mask=torch.ones(3, 3, dtype=torch.bool))
    assert loss.item() == 0.0 and math.isfinite(loss.item())


# ---- the guide filter (GISTEmbed) ---------------------------------------------------------
def _cos(u, v):
    return float(u @ v / (u.norm() * v.norm()))


@pytest.mark.parametrize("strategy,margin", [("absolute", 0.0), ("absolute", 0.1), ("relative", 0.05),
                                             ("absolute", -0.05)])
@pytest.mark.parametrize("form", ["nt-xent", "simcse"])
def test_guide_mask_equals_brute_force(strategy, margin, form):
    m, d = 7, 5
    g = torch.Generator().manual_seed(3)
    ga = torch.randn(m, d, generator=g, dtype=torch.float64)
    gp = ga + 0.8 * torch.randn(m, d, generator=g, dtype=torch.float64)  # positives near their anchors
    gh = torch.randn(m, d, generator=g, dtype=torch.float64) if form == "simcse" else None
    rows = torch.arange(2, 6)  # the anchors a rank owns
    mask = negatives.guide_mask((ga, gp, gh), rows, form, margin, strategy)

    def masked(sim, pos):
        return sim > (pos - margin if strategy == "absolute" else pos - abs(pos) * margin)

    want = torch.zeros_like(mask)
    if form == "nt-xent":
        views = torch.cat([ga, gp])
        anchors = [int(r) for r in rows] + [int(r) + m for r in rows]
        for a_row, a in enumerate(anchors):
            partner = (a + m) % (2 * m)
            pos = _cos(views[a], views[partner])
            for k in range(2 * m):
                if k not in (a, partner):
                    want[a_row, k] = masked(_cos(views[a], views[k]), pos)
    else:
        cands = torch.cat([gp, gh])
        for a_row, i in enumerate(rows.tolist()):
            pos = _cos(ga[i], gp[i])
            for k in range(2 * m):
                if k != i:
                    want[a_row, k] = masked(_cos(ga[i], cands[k]), pos)
    assert torch.equal(mask, want)
    assert want.any() and not want.all()  # the check checks something


# ---- the criterion: 1 and 2 gloo ranks, GradCache, --accumulate-contrastive -----------------
DUPLICATES = [(0, 5), (2, 3), (1, 6)]  # across ranks (sizes [4, 3]) and within rank 0


def _criterion_brute(sizes, form, options):
    """The criterion's summed contrastive term over the whole batch, brute force."""
    total = sum(sizes)
    hard = form == "simcse"
    batch = dist_check.global_batch(total, hard, DUPLICATES)
    model = dist_check.TinyModel().double()
    with torch.no_grad():
        z = [model(v, contrastive=True)[0] for v in batch["views"]]
    texts = [{tuple(v[i][v[i].ne(dist_check.PAD)].tolist()) for v in batch["views"][:2]} for i in range(total)]
    dims = [int(x) for x in options.get("matryoshka_dims", "").split(",") if x] or None
    weights = [float(x) for x in options.get("matryoshka_weights", "").split(",") if x] or (
        None if dims is None else [1.0] * len(dims))
    if form == "nt-xent":
        return _brute_nt_xent(z[0], z[1], texts, 0.05, dims, weights)
    hard_texts = [tuple(r[r.ne(dist_check.PAD)].tolist()) for r in batch["views"][2]]
    return _brute_simcse(z[0], z[1], z[2], texts, hard_texts, 0.05, 0.0, dims, weights)


CASES = [
    ([4, 3], "nt-xent", "criterion", {"mask_duplicates": True, "contrastive_chunk_size": 3, "double": True,
                                       "duplicates": DUPLICATES}),
    ([4, 3], "simcse", "criterion", {"mask_duplicates": True, "contrastive_chunk_size": 2, "double": True,
                                      "duplicates": DUPLICATES}),
    ([4, 3], "nt-xent", "criterion", {"mask_duplicates": True, "matryoshka_dims": "8,4,2",
                                       "matryoshka_weights": "1,0.5,0.25", "contrastive_chunk_size": 3,
                                       "double": True, "duplicates": DUPLICATES}),
    ([5, 0], "simcse", "criterion", {"matryoshka_dims": "6,3", "contrastive_chunk_size": 2, "double": True}),
]


@pytest.fixture(scope="module")
def two_ranks():
    return dist_check.run(CASES)


def _plain(options):
    return {k: v for k, v in options.items() if k != "contrastive_chunk_size"}


@pytest.mark.parametrize("case", range(len(CASES)))
def test_criterion_on_one_rank_with_gradcache_equals_brute_force_and_plain(case):
    sizes, form, level, options = CASES[case]
    one = dist_check.reference(sizes, form, level, options)
    plain = dist_check.reference(sizes, form, level, _plain(options))
    if options.get("duplicates"):
        assert one["cl_loss"] == pytest.approx(_criterion_brute(sizes, form, options), rel=1e-10)
        assert one["dup_masked"] > 0
    assert one["loss_over_size"] == pytest.approx(plain["loss_over_size"], rel=1e-12)
    for k, grad in plain["grads"].items():  # GradCache's backward: the same gradients
        assert torch.allclose(one["grads"][k], grad, rtol=1e-6, atol=1e-9), k


@pytest.mark.parametrize("case", range(len(CASES)))
def test_criterion_on_two_gloo_ranks_equals_one_process(two_ranks, case):
    sizes, form, level, options = CASES[case]
    got = two_ranks[case]
    want = dist_check.reference(sizes, form, level, _plain(options))
    # (the MLM term is summed in float32 by the criterion, whatever the model's precision)
    assert got["loss_over_size"] == pytest.approx(want["loss_over_size"], rel=1e-6)
    assert got["cl_loss"] == pytest.approx(want["cl_loss"], rel=1e-10)
    assert got["dup_masked"] == want["dup_masked"]
    for k, grad in want["grads"].items():
        assert torch.allclose(got["grads"][k], grad, rtol=1e-6, atol=1e-9), k


def test_matryoshka_loss_is_the_weighted_sum_of_each_size_computed_separately():
    g = torch.Generator().manual_seed(5)
    z1, z2, z3 = (torch.randn(6, 16, generator=g, dtype=torch.float64) for _ in range(3))
    dims, weights = [16, 8, 4], [1.0, 0.3, 2.0]
    for fn, args in ((losses.nt_xent, (z1, z2, TAU)), (losses.simcse, (z1, z2, TAU, None, z3, 0.2))):
        got, _ = fn(*args, dims=dims, dim_weights=weights)
        want = sum(w * fn(*(a[:, :d] if torch.is_tensor(a) and a.dim() == 2 else a for a in args))[0]
                   for d, w in zip(dims, weights))
        assert got.item() == pytest.approx(want.item(), rel=1e-12)


# ---- duplicate-free batches (--batch-without-duplicates) --------------------------------------
@pytest.mark.parametrize("max_sentences,max_tokens", [(4, None), (3, 20), (None, 12)])
def test_duplicate_free_batches_hold_no_text_twice_and_every_sample_once(max_sentences, max_tokens):
    import numpy as np

    from fairseq_clear.data.duplicate_free_batches import duplicate_free_batches

    rng = np.random.default_rng(0)
    keys = rng.integers(0, 12, size=(40, 2))  # 12 texts over 40 two-column rows: many repeats
    sizes = rng.integers(2, 6, size=40)
    order = rng.permutation(40)
    batches = duplicate_free_batches(order, keys, sizes, max_tokens, max_sentences)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(40))
    for b in batches:
        rows = [set(keys[i].tolist()) for i in b]  # no text shared by two rows of a batch
        assert len(set().union(*rows)) == sum(len(r) for r in rows), (b, keys[b])
        if max_sentences:
            assert len(b) <= max_sentences
        if max_tokens and len(b) > 1:
            assert len(b) * sizes[b].max() <= max_tokens
    # the first batch takes the first rows of the order that do not repeat a text
    first, seen = [], set()
    for i in order:
        if not seen.intersection(keys[i].tolist()):
            if max_sentences and len(first) == max_sentences:
                break
            if max_tokens and (len(first) + 1) * max([sizes[j] for j in first] + [sizes[i]]) > max_tokens:
                break
            first.append(int(i))
            seen.update(keys[i].tolist())
    assert batches[0].tolist() == first


@pytest.fixture(scope="module")
def repeated_pairs(tiny_data, tmp_path_factory):
    """Pairs data whose 40 anchors come three times each (other positives), by clear-prepare-pairs."""
    from helpers import bin_path, run_cli, synthetic_sentences

    work = tmp_path_factory.mktemp("repeated_pairs")
    anchors = synthetic_sentences(40, seed=8)
    positives = synthetic_sentences(120, seed=9)
    csv = work / "pairs.csv"
    csv.write_text("sent0,sent1\n" + "".join(f'"{anchors[i % 40]}","{positives[i]}"\n' for i in range(120)),
                   encoding="utf-8")
    run_cli([bin_path("clear-prepare-pairs"), "--train", csv, "--data", tiny_data, "--out", work / "bin"])
    return work / "bin"


def _pair_batches(data, *extra):
    from harness.runs import build_task

    task, _ = build_task(data, "--task", "contrastive_pairs", "--batch-size", "16", *extra)
    itr = task.get_batch_iterator(task.dataset("train"), max_sentences=16, seed=1).next_epoch_itr(shuffle=True)
    return [batch["contrastive"] for batch in itr]


def _rows_sharing_a_text(views):
    n = views["num_anchors"]
    keys = views["source_keys"].view(2, n).t().tolist()  # (anchor, positive) of each row
    seen, shared = set(), 0
    for row in keys:
        shared += bool(seen.intersection(row))
        seen.update(row)
    return shared


def test_pairs_task_batches_without_duplicates(repeated_pairs):
    plain = _pair_batches(repeated_pairs)
    assert sum(_rows_sharing_a_text(v) for v in plain) > 0  # the data does repeat texts in a batch
    batches = _pair_batches(repeated_pairs, "--batch-without-duplicates")
    assert sum(v["num_anchors"] for v in batches) == 120  # every row, once
    assert all(_rows_sharing_a_text(v) == 0 for v in batches)
