from fairseq.data import BaseWrapperDataset


class ListItemDataset(BaseWrapperDataset):
    """Element ``k`` of each item of a dataset whose items are lists (e.g. one DeCLUTR span).

    Lets fairseq's per-tensor wrappers (``MaskTokensDataset``) work on one row
    of a multi-row item.
    """

    def __init__(self, dataset, k: int):
        super().__init__(dataset)
        self.k = k

    def __getitem__(self, index):
        return self.dataset[index][self.k]
