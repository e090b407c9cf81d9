import logging

import numpy as np
from fairseq.data import BaseWrapperDataset

from ..negatives import token_key

logger = logging.getLogger(__name__)


class DuplicateFreeBatchesDataset(BaseWrapperDataset):
    """Batches in which no text occurs twice (``--batch-without-duplicates``).

    sentence-transformers' ``NoDuplicatesBatchSampler``: the samples are taken in the wrapped
    dataset's order (a fresh random one every epoch); a sample that shares a text (any column:
    anchor, positive, hard negative) with the batch being filled waits for a later batch, where
    it keeps its place in the order. A batch closes at ``--batch-size`` samples or
    ``--max-tokens``. Texts are compared by their token sequences
    (:func:`~fairseq_clear.negatives.token_key`); the samples that had to wait are counted in the log.

    Args:
        dataset: the samples (what fairseq batches).
        columns: the datasets of the texts of each sample (one item per sample each).
        sizes: each sample's size in tokens (what ``--max-tokens`` counts).
    """

    def __init__(self, dataset, columns, sizes):
        super().__init__(dataset)
        self.columns = list(columns)
        self.sample_sizes = np.asarray(sizes, dtype=np.int64)
        self._keys = None

    @property
    def keys(self) -> np.ndarray:
        if self._keys is None:  # computed once, when batches are first made
            self._keys = np.array([[token_key(c[i]) for c in self.columns] for i in range(len(self))],
                                  dtype=np.int64).reshape(len(self), len(self.columns))
        return self._keys

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        return duplicate_free_batches(np.asarray(indices, dtype=np.int64), self.keys, self.sample_sizes,
                                      max_tokens, max_sentences)


def duplicate_free_batches(indices, keys, sizes, max_tokens=None, max_sentences=None):
    """Greedy batches of ``indices`` (in order) with no key twice in a batch (see the class)."""
    remaining = [int(i) for i in indices]
    batches, waited = [], set()
    while remaining:
        batch, seen, deferred, rest, width = [], set(), [], [], 0
        for pos, index in enumerate(remaining):
            row = keys[index].tolist()
            if seen.intersection(row):
                deferred.append(index)
                continue
            w = max(width, int(sizes[index]))
            if batch and ((max_sentences and len(batch) >= max_sentences)
                          or (max_tokens and (len(batch) + 1) * w > max_tokens)):
                rest = remaining[pos:]
                break
            batch.append(index)
            seen.update(row)
            width = w
        waited.update(deferred)
        batches.append(np.array(batch, dtype=np.int64))
        remaining = deferred + rest
    logger.info("batches without duplicates: %d batches of %d samples; %d samples waited for a later batch "
                "(they shared a text with the batch being filled)", len(batches), len(indices), len(waited))
    return batches
