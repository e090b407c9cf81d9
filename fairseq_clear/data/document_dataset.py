import logging

import numpy as np
import torch

from .own_items_dataset import RegroupingDataset

logger = logging.getLogger(__name__)


class DocumentDataset(RegroupingDataset):
    """Documents of a binarized split: runs of non-empty lines between empty lines.

    fairseq-preprocess stores each line as ``body </s>`` and an empty line
    (the document separator, docs/design.md) as a lone ``</s>``. A document is
    the concatenation of its lines' bodies (no ``</s>`` inside), i.e. running
    text in which spans may cross sentence boundaries, as in DeCLUTR.
    Documents shorter than ``min_tokens`` are skipped; they are counted and
    logged, since DeCLUTR cannot sample its spans from them.

    Args:
        lines: the indexed dataset of a split (items end with ``</s>``).
        min_tokens: shortest document kept.
        name: split name, for the log line.
    """

    def __init__(self, lines, min_tokens: int, name: str = ""):
        super().__init__(lines)
        body = np.asarray(lines.sizes, dtype=np.int64) - 1
        is_text = body > 0
        # a document starts at a text line that follows a separator (or the split start)
        starts = np.flatnonzero(is_text & ~np.concatenate([[False], is_text[:-1]]))
        ends = np.flatnonzero(is_text & ~np.concatenate([is_text[1:], [False]])) + 1
        cumsum = np.concatenate([[0], np.cumsum(body)])
        tokens = cumsum[ends] - cumsum[starts]
        keep = tokens >= min_tokens
        self.line_starts, self.line_ends = starts[keep], ends[keep]
        self._sizes = tokens[keep]
        self.min_tokens = min_tokens
        self.num_skipped = int((~keep).sum())
        self.num_skipped_tokens = int(tokens[~keep].sum())
        total = max(int(tokens.sum()), 1)
        logger.info(
            "%s: %d documents (%d tokens); skipped %d documents shorter than %d tokens "
            "(%d tokens, %.1f%% of the split)",
            name or "split",
            len(self._sizes),
            int(self._sizes.sum()),
            self.num_skipped,
            min_tokens,
            self.num_skipped_tokens,
            100.0 * self.num_skipped_tokens / total,
        )

    def __getitem__(self, index):
        lines = range(int(self.line_starts[index]), int(self.line_ends[index]))
        return torch.cat([self.dataset[j][:-1] for j in lines])
