import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, data_utils

from ..augmentations import Augmentation
from ..keyed_rng import KeyedRNG
from ..negatives import token_key


class Views(list):
    """The two views of one sentence, ``[view1, view2]``, and ``source_key``: the
    :func:`~fairseq_clear.negatives.token_key` of the sentence they were made from
    (``--mask-duplicates``)."""

    def __init__(self, views, source_key: int):
        super().__init__(views)
        self.source_key = source_key


class ContrastiveViewsDataset(BaseWrapperDataset):
    """Two augmented views ``s~1 = AUG(s, seed1)``, ``s~2 = AUG(s, seed2)`` of each sentence.

    The augmentation's randomness is keyed by (seed, epoch, sample index, view),
    so views are reproducible, differ between the two views, change every
    epoch, and replay exactly when a run resumes from a checkpoint.

    Items are :class:`Views` ``[view1, view2]`` (each ``<s> ... </s>``, with the sentence's
    ``source_key``); the collater pads all
    ``2N`` views of a batch into one tensor, anchors (view 1) first, so that the
    criterion encodes them in a single forward pass.

    Args:
        sentences: ``<s> body </s>`` samples.
        augment: ``f(body, rng) -> body`` (see :mod:`fairseq_clear.augmentations`), or a pair of them,
            one per view (ESimCSE's word repetition in the positive only: --word-rep-views).
        seed: ``--seed``.
        max_body_len: views longer than this (``subs`` can lengthen) are truncated.
        bos, eos, pad: special ids.
    """

    def __init__(self, sentences, augment: Augmentation, seed: int, max_body_len: int, bos, eos, pad):
        super().__init__(sentences)
        self.augments = tuple(augment) if isinstance(augment, (tuple, list)) else (augment, augment)
        self.seed = seed
        self.max_body_len = max_body_len
        self.bos, self.eos, self.pad = bos, eos, pad
        self.epoch = 1
        self._rng = KeyedRNG()

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return True  # views depend on the epoch, the batches do not

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        self.epoch = epoch

    def view(self, index: int, view: int) -> torch.Tensor:
        body = self.dataset[index][1:-1].numpy()
        rng = self._rng(self.seed, self.epoch, index, view)
        out = self.augments[view - 1](body, rng)[: self.max_body_len]
        return torch.from_numpy(
            np.concatenate([[self.bos], out, [self.eos]]).astype(np.int64, copy=False)
        )

    def __getitem__(self, index):
        return Views([self.view(index, 1), self.view(index, 2)], token_key(self.dataset[index]))

    def collater(self, samples):
        if len(samples) == 0:
            return {}
        views = [s[0] for s in samples] + [s[1] for s in samples]
        return {
            "src_tokens": data_utils.collate_tokens(views, self.pad),
            "num_anchors": len(samples),
            "positives_per_anchor": 1,
            # both views of a sentence carry the key of the sentence they were made from
            "source_keys": torch.tensor([s.source_key for s in samples] * 2, dtype=torch.long),
        }
