"""The criterion's weighting is one pure function: the docstring's formula, and fairseq's normaliser turns it into the paper's loss."""

import pytest
import torch
from fairseq_clear.criterions.clear import weighted_loss


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
