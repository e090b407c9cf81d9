from .contrastive_rows_dataset import ContrastiveRowsDataset
from .contrastive_views_dataset import ContrastiveViewsDataset
from .document_dataset import DocumentDataset
from .duplicate_free_batches import DuplicateFreeBatchesDataset
from .document_spans_dataset import DocumentSpansDataset
from .epoch_shuffled_dataset import EpochShuffledDataset
from .list_item_dataset import ListItemDataset
from .multitask_dataset import MultitaskDataset, TaskRows
from .row_tokens_dataset import RowTokensDataset
from .sentence_dataset import SentenceDataset
from .stacked_rows_dataset import StackedRowsDataset

__all__ = [
    "ContrastiveRowsDataset",
    "ContrastiveViewsDataset",
    "DocumentDataset",
    "DuplicateFreeBatchesDataset",
    "DocumentSpansDataset",
    "EpochShuffledDataset",
    "ListItemDataset",
    "MultitaskDataset",
    "RowTokensDataset",
    "SentenceDataset",
    "StackedRowsDataset",
    "TaskRows",
]
