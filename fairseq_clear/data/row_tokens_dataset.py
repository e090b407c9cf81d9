from fairseq.data import FairseqDataset


class RowTokensDataset(FairseqDataset):
    """Number of tokens in item ``i`` of all the given token datasets; a batch sums them (``ntokens``)."""

    def __init__(self, datasets):
        super().__init__()
        self.datasets = list(datasets)

    def __len__(self):
        return len(self.datasets[0])

    def __getitem__(self, index):
        return sum(int(d[index].numel()) for d in self.datasets)

    def collater(self, samples):
        return sum(samples)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return all(d.can_reuse_epoch_itr_across_epochs for d in self.datasets)

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        for d in self.datasets:
            d.set_epoch(epoch)
