from typing import Optional, Sequence

import numpy as np
import torch

from fairseq.data import FairseqDataset, data_utils

from ..negatives import token_key


class ContrastiveRowsDataset(FairseqDataset):
    """The ``contrastive`` part of a sample from datasets of anchors, positives and hard negatives.

    Each sample holds A anchors (``anchors``: A datasets), P positives per
    anchor (``positives``: A·P datasets, positive ``p`` of anchor ``a`` at
    ``a·P + p``) and optionally one hard negative per anchor
    (``hard_negatives``: A datasets). The collater lays a batch of N samples
    out as docs/design.md's sample contract requires: the N·A anchors, then the
    N·A·P positives anchor-major (positive ``p`` of anchor ``k`` at row
    ``N·A + k·P + p``), then the N·A hard negatives, in one padded tensor.

    DeCLUTR uses A = P = 2 from one document; supervised pairs use A = P = 1
    with or without a hard negative (SimCSE, CLSR). ``signs`` (one per sample, +1 or -1):
    seed 004's labelled pairs, whose label-0 pairs' loss is maximised; the batch then carries
    ``pair_signs`` (one per anchor). ``source_keys``: each row's
    :func:`~fairseq_clear.negatives.token_key` (``--mask-duplicates``).
    """

    def __init__(
        self,
        anchors: Sequence,
        positives: Sequence,
        hard_negatives: Optional[Sequence] = None,
        pad: int = 1,
        signs: Optional[np.ndarray] = None,
    ):
        super().__init__()
        self.anchors = list(anchors)
        self.positives = list(positives)
        self.hard_negatives = list(hard_negatives) if hard_negatives else []
        a = len(self.anchors)
        if a == 0 or len(self.positives) % a != 0:
            raise ValueError(
                f"need A >= 1 anchor datasets and A·P positive datasets, got {a} and "
                f"{len(self.positives)}"
            )
        if self.hard_negatives and len(self.hard_negatives) != a:
            raise ValueError(f"need one hard-negative dataset per anchor ({a}), got {len(self.hard_negatives)}")
        self.positives_per_anchor = len(self.positives) // a
        self.pad = pad
        self.signs = None if signs is None else np.asarray(signs, dtype=np.float32)
        if self.signs is not None and len(self.signs) != len(self.anchors[0]):
            raise ValueError(f"need one sign per sample ({len(self.anchors[0])}), got {len(self.signs)}")

    @property
    def _all(self):
        return self.anchors + self.positives + self.hard_negatives

    def __len__(self):
        return len(self.anchors[0])

    def __getitem__(self, index):
        return (
            [d[index] for d in self.anchors],
            [d[index] for d in self.positives],
            [d[index] for d in self.hard_negatives],
            None if self.signs is None else float(self.signs[index]),
        )

    def collater(self, samples):
        if len(samples) == 0:
            return {}
        anchors = [row for s in samples for row in s[0]]
        positives = [row for s in samples for row in s[1]]
        hard = [row for s in samples for row in s[2]]
        out = {
            "src_tokens": data_utils.collate_tokens(anchors + positives + hard, self.pad),
            "num_anchors": len(anchors),
            "positives_per_anchor": self.positives_per_anchor,
            "hard_negatives": bool(self.hard_negatives),
            # each row's own token sequence: --mask-duplicates
            "source_keys": torch.tensor([token_key(r) for r in anchors + positives + hard], dtype=torch.long),
        }
        if self.signs is not None:
            out["pair_signs"] = torch.tensor([s[3] for s in samples for _ in s[0]], dtype=torch.float32)
        return out

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return all(d.can_reuse_epoch_itr_across_epochs for d in self._all)

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        for d in self._all:
            d.set_epoch(epoch)
