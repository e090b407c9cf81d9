from fairseq.data import BaseWrapperDataset, FairseqDataset


class OwnItemsDataset(FairseqDataset):
    """A dataset whose items' sizes are ``self._sizes`` (set by the subclass): its length and sizes
    are those, its order and prefetching fairseq's defaults for a dataset."""

    # named, not only inherited: they win over BaseWrapperDataset's delegation in a RegroupingDataset
    ordered_indices = FairseqDataset.ordered_indices
    supports_prefetch = FairseqDataset.supports_prefetch

    def __len__(self):
        return len(self._sizes)

    @property
    def sizes(self):
        return self._sizes

    def size(self, index):
        return int(self._sizes[index])

    def num_tokens(self, index):
        return int(self._sizes[index])


class RegroupingDataset(OwnItemsDataset, BaseWrapperDataset):
    """A wrapper whose items are its own, made from its inner dataset's (sentences or documents of
    a split's lines, spans of documents): length, sizes, order and prefetching are not its inner
    dataset's (``BaseWrapperDataset``'s delegation) but its own (``OwnItemsDataset``)."""
