"""The guide's relative margin (--guide-margin-strategy relative) is sentence-transformers'
GISTEmbedLoss's: a candidate is masked when ``sim > sim_pos - |sim_pos|·margin`` (the same form as
clear-mine-negatives' --relative-margin), not ``sim > sim_pos·(1 - margin)``, which differs
whenever the guide's positive cosine is negative. Checked against brute force on batches whose
positives the guide scores below zero, and against GISTEmbedLoss's own masking (its forward, fed
the same guide vectors, with its cross-entropy replaced by a recorder of the masked scores)."""

import pytest
import torch

from fairseq_clear import negatives


def _cos(u, v):
    return float(u @ v / (u.norm() * v.norm()))


def _guide_vectors(m=9, d=6, seed=5, hard=True):
    """Guide vectors where about half the anchors' positives score below zero."""
    g = torch.Generator().manual_seed(seed)
    ga = torch.randn(m, d, generator=g, dtype=torch.float64)
    sign = torch.tensor([(-1.0) ** i for i in range(m)], dtype=torch.float64)[:, None]
    gp = sign * ga + 0.9 * torch.randn(m, d, generator=g, dtype=torch.float64)
    gh = torch.randn(m, d, generator=g, dtype=torch.float64) if hard else None
    return ga, gp, gh


@pytest.mark.parametrize("margin", [0.1, 0.5, -0.2])
@pytest.mark.parametrize("form", ["nt-xent", "simcse"])
def test_relative_margin_equals_brute_force_with_negative_positive_cosines(margin, form):
    m = 9
    ga, gp, gh = _guide_vectors(m, hard=form == "simcse")
    rows = torch.arange(1, 8)
    mask = negatives.guide_mask((ga, gp, gh), rows, form, margin, "relative")

    want = torch.zeros_like(mask)
    old = torch.zeros_like(mask)  # the (1 - margin) form, to show the batch tells them apart
    negative_positives = 0
    if form == "nt-xent":
        views = torch.cat([ga, gp])
        anchors = rows.tolist() + [r + m for r in rows.tolist()]
        pairs = [(a, (a + m) % (2 * m)) for a in anchors]
        candidates = views
    else:
        candidates = torch.cat([gp, gh])
        pairs = [(i, i) for i in rows.tolist()]
    for row, (a, partner) in enumerate(pairs):
        anchor = views[a] if form == "nt-xent" else ga[a]
        pos = _cos(anchor, candidates[partner])
        negative_positives += pos < 0
        for k in range(candidates.size(0)):
            if k in ((a, partner) if form == "nt-xent" else (partner,)):
                continue  # itself and its positive are never negatives
            sim = _cos(anchor, candidates[k])
            want[row, k] = sim > pos - abs(pos) * margin
            old[row, k] = sim > pos * (1 - margin)
    assert negative_positives >= 3
    assert torch.equal(mask, want)
    assert not torch.equal(want, old) and want.any() and not want.all()  # the check checks something


def _gist_masks(ga, gp, gh, margin, strategy):
    """GISTEmbedLoss's masked candidates (anchor-positive then anchor-negative columns, SimCSE's
    layout): its forward on the given guide vectors, the masked scores read where it puts -inf."""
    from sentence_transformers.sentence_transformer.losses import gist_embed

    loss = gist_embed.GISTEmbedLoss.__new__(gist_embed.GISTEmbedLoss)
    torch.nn.Module.__init__(loss)
    model, guide = object(), object()
    recorded = {}
    loss.__dict__.update(
        model=model, guide=guide, temperature=0.01, similarity_fct=torch.nn.CosineSimilarity(dim=-1),
        must_retokenize=False, margin_strategy=strategy, margin=margin, contrast_anchors=False,
        contrast_positives=False, gather_across_devices=False,
        cross_entropy_loss=lambda scores, labels: recorded.setdefault("scores", scores))
    # the trained model's vectors do not matter to the mask: the guide's for both
    columns = [ga, gp, gh]
    original = gist_embed.embed_columns
    gist_embed.embed_columns = lambda who, features: [c.clone() for c in columns]
    try:
        loss.forward([{}, {}, {}], None)
    finally:
        gist_embed.embed_columns = original
    return torch.isneginf(recorded["scores"])


@pytest.mark.parametrize("strategy,margin", [("relative", 0.3), ("relative", 0.05), ("absolute", 0.1)])
def test_the_mask_equals_gistembedloss_own(strategy, margin):
    ga, gp, gh = _guide_vectors(m=12, seed=11)
    want = _gist_masks(ga, gp, gh, margin, strategy)
    got = negatives.guide_mask((ga, gp, gh), torch.arange(12), "simcse", margin, strategy)
    assert torch.equal(got, want)
    assert want.any() and not want.all()
    assert (torch.nn.functional.cosine_similarity(ga, gp) < 0).sum() >= 3
