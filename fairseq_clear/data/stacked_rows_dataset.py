import numpy as np
from fairseq.data import FairseqDataset, data_utils


class StackedRowsDataset(FairseqDataset):
    """Several token datasets read side by side; a batch is all their rows in one padded tensor.

    Item ``i`` is ``[d[i] for d in datasets]``; the collater pads the rows of
    every sample into one ``(N·K) x T`` tensor (sample-major). Used for the MLM
    input and target when a sample has several sentences (DeCLUTR's A anchors,
    a pair's sentences), so that one forward pass covers them.
    """

    def __init__(self, datasets, pad: int):
        super().__init__()
        if not datasets:
            raise ValueError("StackedRowsDataset needs at least one dataset")
        self.datasets = list(datasets)
        self.pad = pad

    def __len__(self):
        return len(self.datasets[0])

    def __getitem__(self, index):
        return [d[index] for d in self.datasets]

    def collater(self, samples):
        rows = [row for sample in samples for row in sample]
        if not rows:
            return None
        return data_utils.collate_tokens(rows, self.pad)

    @property
    def sizes(self):
        return np.max(np.stack([np.asarray(d.sizes) for d in self.datasets]), axis=0)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return all(d.can_reuse_epoch_itr_across_epochs for d in self.datasets)

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        for d in self.datasets:
            d.set_epoch(epoch)
