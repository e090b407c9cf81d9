"""Keep the sentences that fairseq's batching would drop.

``FairseqDataset.batch_by_size`` drops the *last* batch of an epoch whenever its
size is not a multiple of ``--required-batch-size-multiple`` (default 8). The
indices are sorted by length, so the same longest sentences are left out in
every epoch, silently; a corpus smaller than the multiple yields no batch at all
and fairseq reports "The dataset is empty". :func:`keeping_last_batch` puts that
batch back (its odd size costs nothing but tensor-core alignment) and logs it. It is
used by the plugin's tasks (``ContrastiveTask.get_batch_iterator``), not patched into fairseq.
"""

import contextlib
import logging

import sys

import numpy as np

from ._version import applies

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def keeping_last_batch(dataset):
    """While active, ``dataset.batch_by_size`` drops no index (an instance attribute,
    removed on exit so that the dataset still pickles for DataLoader workers)."""
    if not applies(sys.modules[__name__]):
        yield dataset
        return
    original = dataset.batch_by_size

    def batch_by_size(indices, max_tokens=None, max_sentences=None,
                      required_batch_size_multiple=1, *args, **kwargs):
        batches = original(indices, max_tokens, max_sentences, required_batch_size_multiple,
                           *args, **kwargs)
        indices = np.asarray(indices, dtype=np.int64)
        if sum(len(b) for b in batches) < len(indices):
            kept = np.concatenate(batches) if len(batches) else np.zeros(0, dtype=np.int64)
            tail = indices[~np.isin(indices, kept)]
            logger.info(
                "kept the last batch of %d samples, which --required-batch-size-multiple %d "
                "does not divide (fairseq would drop it every epoch)",
                len(tail), required_batch_size_multiple,
            )
            batches = list(batches) + [tail]
        return batches

    had_own = "batch_by_size" in vars(dataset)
    dataset.batch_by_size = batch_by_size
    try:
        yield dataset
    finally:
        if had_own:
            dataset.batch_by_size = original
        else:
            del dataset.batch_by_size
