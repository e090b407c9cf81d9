"""A fairseq-clear encoder in the form ``mteb.evaluate`` runs (MTEB 2's EncoderProtocol).

    pip install "fairseq-clear[mteb]"        # mteb 2 and the pyarrow it works with here
    import mteb
    from fairseq_clear.evaluation.mteb_encoder import MtebEncoder
    hub = ClearRobertaModel.from_pretrained("checkpoints", "checkpoint_best.pt", "data-bin")
    model = MtebEncoder(hub, name="me/clear-roberta")
    mteb.evaluate(model, tasks=mteb.get_tasks(tasks=["STSBenchmark"]))   # online: downloads the task

MTEB hands ``encode`` a DataLoader of batches (dicts with a ``"text"`` list) and the task's
metadata, split, subset and prompt type; the model has no prompts, so those are accepted and
ignored. A plain list or iterable of strings works too (MTEB 1 and sentence-transformers
style). Similarity is cosine, the similarity every table in this project reports.
"""

from typing import Optional

import numpy as np
import torch

from ..errors import FairseqClearError
from ..models.inference import NonFiniteVectorsError
from ..search import SearchInputError, unit_rows


class MtebInputError(FairseqClearError, TypeError):
    """``encode`` was given something other than sentences; the message names its type."""


def _texts(inputs) -> list:
    """Flatten whatever MTEB passes (DataLoader of batch dicts, list of str/dicts) to strings."""
    # iterating these gives characters, ints or keys, never sentences: refuse the container
    if isinstance(inputs, (str, bytes, bytearray, memoryview, dict)) or not hasattr(inputs, "__iter__"):
        raise MtebInputError(f"encode() takes a list of sentences or MTEB batches, not a {type(inputs).__name__}")
    texts = []
    for n, item in enumerate(inputs):
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict):
            if "text" not in item:
                raise MtebInputError(f"MTEB batch without a 'text' field (keys: {sorted(item)}); "
                                     "fairseq-clear encodes text only")
            value = item["text"]
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, (bytes, bytearray, memoryview, dict)) or not hasattr(value, "__iter__"):
                raise MtebInputError(f"batch {n}'s 'text' is a {type(value).__name__}, not a list of str")
            else:
                texts.extend(value)
        else:
            raise MtebInputError(f"cannot encode a {type(item).__name__}; expected str or an MTEB batch dict")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise MtebInputError(f"sentences[{i}] is {type(text).__name__} ({text!r:.40}), not str")
    return texts


class MtebEncoder:
    """Wrap a fairseq-clear hub (or any ``list[str] -> array`` callable) for MTEB."""

    def __init__(self, hub, pooling: Optional[str] = None, head: str = "representation",
                 normalize: bool = False, name: Optional[str] = None, revision: Optional[str] = None):
        if not hasattr(hub, "embed") and not callable(hub):
            raise TypeError("MtebEncoder needs a fairseq-clear hub (with .embed) or a callable list[str] -> array")
        self.hub, self.pooling, self.head, self.normalize = hub, pooling, head, normalize
        self.name = name or "fairseq-clear/model"
        if "/" not in self.name:
            raise ValueError(f"name={self.name!r}: MTEB wants 'organization/model_name'")
        self.revision = revision
        self._meta = None

    @property
    def mteb_model_meta(self):
        """MTEB's ModelMeta; without it mteb.evaluate would not run this object at all."""
        if self._meta is None:
            from mteb.models.model_meta import ModelMeta

            dim = getattr(self.hub, "dim", None)
            self._meta = ModelMeta.create_empty(overwrites={
                "name": self.name, "revision": self.revision, "embed_dim": dim,
                "similarity_fn_name": "cosine", "framework": ["PyTorch"], "languages": None,
            })
        return self._meta

    def encode(self, inputs, *, task_metadata=None, hf_split=None, hf_subset=None, prompt_type=None,
               batch_size: int = 64, show_progress_bar: bool = False, **kwargs) -> np.ndarray:
        sentences = _texts(inputs)
        if hasattr(self.hub, "embed"):
            vectors = self.hub.embed(sentences, pooling=self.pooling, head=self.head, batch_size=batch_size,
                                     normalize=self.normalize, show_progress=show_progress_bar)
        else:
            vectors = self.hub(sentences)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(sentences):
            raise ValueError(f"the encoder returned shape {vectors.shape} for {len(sentences)} sentences")
        bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
        if len(bad):
            # MTEB would score NaN vectors as if they were results
            shown = ", ".join(map(str, bad[:5].tolist())) + (", ..." if len(bad) > 5 else "")
            raise NonFiniteVectorsError(
                f"the encoder returned NaN or Inf for {len(bad)} of {len(sentences)} sentences "
                f"(sentences {shown}; the first: {sentences[bad[0]]!r:.80})"
            )
        return vectors

    def similarity(self, embeddings1, embeddings2) -> torch.Tensor:
        """Cosine matrix (search.unit_rows: scale-safe; zero vectors give 0, NaN/Inf is refused)."""
        return unit_rows(embeddings1, "embeddings1") @ unit_rows(embeddings2, "embeddings2").T

    def similarity_pairwise(self, embeddings1, embeddings2) -> torch.Tensor:
        """Cosine of each pair ``(embeddings1[i], embeddings2[i])``."""
        a, b = unit_rows(embeddings1, "embeddings1"), unit_rows(embeddings2, "embeddings2")
        if a.shape != b.shape:
            raise SearchInputError(f"similarity_pairwise needs equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
        return (a * b).sum(-1)


def local_sts_task(pairs, name: str = "LocalSTS", min_score: float = 0.0, max_score: float = 5.0):
    """An MTEB STS task over local scored pairs (a ``preprocessing.sts_readers.StsPairs``), for offline runs.

    ``mteb.evaluate(MtebEncoder(hub), tasks=[local_sts_task(read_sts_benchmark("sts-test.csv"))],
    cache=None)`` scores the pairs with MTEB's own STS evaluator, no download.
    """
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    if not len(pairs.scores):
        raise ValueError(f"local_sts_task: {pairs.name!r} has no pairs")
    data = {"sentence1": list(pairs.sent1), "sentence2": list(pairs.sent2),
            "score": [float(s) for s in pairs.scores]}
    metadata = TaskMetadata(
        name=name, type="STS", main_score="cosine_spearman", category="t2t", modalities=["text"],
        description=f"Local scored pairs ({pairs.name}), evaluated offline.",
        reference="https://github.com/embeddings-benchmark/mteb", dataset={"path": "local", "revision": "local"},
        eval_splits=["test"], eval_langs=["eng-Latn"], date=None, dialect=[], domains=[], task_subtypes=[],
        license="not specified", annotations_creators="human-annotated", sample_creation="found",
        bibtex_citation="")

    class LocalSTS(AbsTaskSTS):
        def load_data(self, num_proc=None, **kwargs):
            self.dataset = DatasetDict({"test": Dataset.from_dict(data)})
            self.data_loaded = True

    LocalSTS.metadata, LocalSTS.min_score, LocalSTS.max_score = metadata, min_score, max_score
    LocalSTS.__name__ = name
    return LocalSTS()
