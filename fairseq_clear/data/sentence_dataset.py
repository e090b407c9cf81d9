import logging

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset

from .own_items_dataset import RegroupingDataset

logger = logging.getLogger(__name__)


class SentenceDataset(RegroupingDataset):
    """One ``<s> body </s>`` sample per non-empty line of a binarized split.

    fairseq-preprocess stores each line as ``body </s>``. Empty lines (document
    separators, blank input) carry no sentence and are skipped; bodies longer
    than ``max_body_len`` are truncated. Both are counted and logged, since a
    silent drop would change the corpus without anyone knowing.

    Args:
        lines: the indexed dataset of a split (items end with ``</s>``).
        max_body_len: longest body kept (``--tokens-per-sample`` minus 2).
        bos, eos: ids of ``<s>`` and ``</s>``.
        name: split name, for the log line.
    """

    def __init__(self, lines, max_body_len: int, bos: int, eos: int, name: str = ""):
        super().__init__(lines)
        body_sizes = np.asarray(lines.sizes, dtype=np.int64) - 1
        self.indices = np.flatnonzero(body_sizes > 0)
        self.max_body_len = max_body_len
        self.bos, self.eos = bos, eos
        kept = body_sizes[self.indices]
        self.num_empty = int(len(body_sizes) - len(self.indices))
        self.num_truncated = int((kept > max_body_len).sum())
        self._sizes = np.minimum(kept, max_body_len) + 2
        logger.info(
            # the empty lines are the binarized split's: clear-prepare writes one between documents
            # (every line is a document with --documents lines), so a corpus without any has them too
            "%s: %d sentences (%d empty lines of the binarized split, document separators, are not "
            "samples); truncated %d sentences longer than %d tokens",
            name or "split",
            len(self.indices),
            self.num_empty,
            self.num_truncated,
            max_body_len,
        )

    def __getitem__(self, index):
        item = self.dataset[int(self.indices[index])]
        body = item[:-1][: self.max_body_len]
        return torch.cat([body.new([self.bos]), body, body.new([self.eos])])

    # a sentence is one line: the lines' prefetching, through self.indices
    supports_prefetch = BaseWrapperDataset.supports_prefetch

    def prefetch(self, indices):
        self.dataset.prefetch(self.indices[np.asarray(indices)])
