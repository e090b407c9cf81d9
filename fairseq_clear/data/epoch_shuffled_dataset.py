import numpy as np
from fairseq.data import BaseWrapperDataset, data_utils


class EpochShuffledDataset(BaseWrapperDataset):
    """Visit the samples in a new random order every epoch, so batches are regrouped.

    fairseq fixes the order (and hence which samples share a batch) once and
    only shuffles whole batches between epochs. For a contrastive loss the
    batch *is* the set of negatives, and DeCLUTR's, SimCSE's and CLSR's
    trainers draw fresh random batches every epoch (CLSR trains for 2,000
    epochs on 1,406 pairs), so the order here depends on (seed, epoch).
    """

    def __init__(self, dataset, seed: int, sizes=None):
        super().__init__(dataset)
        self.seed = seed
        self.epoch = 1
        # with sizes, samples are ordered by length and shuffled among equal
        # lengths: batches still regroup every epoch, with little padding
        self.bucket_sizes = None if sizes is None else np.asarray(sizes)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # batches must be rebuilt from the new order each epoch

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        self.epoch = epoch

    def ordered_indices(self):
        with data_utils.numpy_seed(self.seed, self.epoch):
            order = np.random.permutation(len(self.dataset))
        if self.bucket_sizes is None:
            return order
        return order[np.argsort(self.bucket_sizes[order], kind="stable")]
