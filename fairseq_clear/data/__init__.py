from .contrastive_views_dataset import ContrastiveViewsDataset
from .sentence_dataset import SentenceDataset

__all__ = ["ContrastiveViewsDataset", "SentenceDataset"]
