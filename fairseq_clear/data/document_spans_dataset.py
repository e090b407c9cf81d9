from collections import OrderedDict

import numpy as np
import torch
from fairseq.data import LRUCacheDataset

from ..keyed_rng import KeyedRNG
from ..span_sampling import SpanSamplingParams, sample_anchors_and_positives
from .own_items_dataset import RegroupingDataset


class DocumentSpansDataset(RegroupingDataset):
    """DeCLUTR's anchor and positive spans of each document (§3.1.1).

    Item ``i`` is a list of ``A + A·P`` tensors ``<s> span </s>``: the A anchors,
    then the positives anchor-major (positive ``p`` of anchor ``a`` at
    ``A + a·P + p``). Spans are drawn by
    :func:`fairseq_clear.span_sampling.sample_anchors_and_positives` from a generator keyed by
    (seed, epoch, document index), so they are reproducible, change every
    epoch and replay exactly after a resume. Spans longer than
    ``max_body_len`` (``--tokens-per-sample`` − 2) are cut to it, as DeCLUTR's
    tokenizer cuts to the model's 512 positions.

    Args:
        documents: a :class:`DocumentDataset` (token tensors without specials).
        params: A, P, ℓmin, ℓmax, Beta parameters.
        seed: ``--seed``.
        max_body_len: longest span fed to the model.
        bos, eos: special ids.
    """

    def __init__(self, documents, params: SpanSamplingParams, seed: int, max_body_len: int, bos, eos):
        super().__init__(documents)
        params.validate()
        self.params = params
        self.seed = seed
        self.max_body_len = max_body_len
        self.bos, self.eos = bos, eos
        self.epoch = 1
        self._rng = KeyedRNG()
        self._cache = OrderedDict()
        row = min(params.max_length, max_body_len) + 2
        self._sizes = np.full(len(documents), row, dtype=np.int64)

    @property
    def rows_per_item(self) -> int:
        return self.params.num_anchors * (1 + self.params.num_positives)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return True  # spans change with the epoch, row sizes do not

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        if epoch != self.epoch:
            self.epoch = epoch
            self._cache.clear()
            # fairseq's MaskTokensDataset.apply_mask wraps its input in an
            # LRUCacheDataset keyed by index only; drop it so that no span of
            # the previous epoch is masked in this one
            LRUCacheDataset.__getitem__.cache_clear()

    def spans(self, index: int):
        """``(anchors (A, 2), positives (A, P, 2))``: ``[start, end)`` positions in document ``index``."""
        rng = self._rng(self.seed, self.epoch, index, 0)
        return sample_anchors_and_positives(int(self.dataset.sizes[index]), self.params, rng)

    def _wrap(self, tokens):
        body = tokens[: self.max_body_len]
        return torch.cat([body.new([self.bos]), body, body.new([self.eos])])

    def __getitem__(self, index):
        key = (self.epoch, int(index))
        if key in self._cache:  # the A + A·P rows of one document are read one by one
            return self._cache[key]
        doc = self.dataset[index]
        anchors, positives = self.spans(index)
        rows = [self._wrap(doc[s:e]) for s, e in anchors]
        rows += [self._wrap(doc[s:e]) for s, e in positives.reshape(-1, 2)]
        self._cache[key] = rows
        if len(self._cache) > 4:
            self._cache.popitem(last=False)
        return rows

    def num_tokens(self, index):
        return int(self._sizes[index]) * self.rows_per_item
