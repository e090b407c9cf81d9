"""The encoder protocol MTEB evaluates (``encode(sentences, **kwargs) -> np.ndarray``).

    import mteb
    from fairseq_clear.evaluation.mteb_encoder import MtebEncoder
    model = MtebEncoder(ClearRobertaModel.from_pretrained("checkpoints", "checkpoint_best.pt", "data-bin"))
    mteb.evaluate(model, tasks=mteb.get_tasks(tasks=["STSBenchmark"]))   # online: downloads the task

MTEB passes ``task_name``, ``prompt_type`` and ``batch_size`` keyword arguments; the
model has no prompts, so the first two are accepted and ignored, ``batch_size`` is honoured.
"""

from typing import Optional

import numpy as np


class MtebEncoder:
    """Wrap a fairseq-clear hub (or any ``embed``-like callable) for MTEB."""

    def __init__(self, hub, pooling: Optional[str] = None, head: str = "representation",
                 normalize: bool = False, name: Optional[str] = None):
        self.hub, self.pooling, self.head, self.normalize = hub, pooling, head, normalize
        self.model_card_data = {"model_name": name or "fairseq-clear"}

    def encode(self, sentences, *, batch_size: int = 64, task_name: Optional[str] = None,
               prompt_type=None, show_progress_bar: bool = False, **kwargs) -> np.ndarray:
        if hasattr(sentences, "__iter__") and not isinstance(sentences, (str, list)):
            sentences = list(sentences)  # MTEB may pass a datasets column or a DataLoader of str
        if isinstance(sentences, list) and sentences and isinstance(sentences[0], dict):
            sentences = [s.get("text", "") for s in sentences]
        vectors = self.hub.embed(sentences, pooling=self.pooling, head=self.head, batch_size=batch_size,
                                 normalize=self.normalize, show_progress=show_progress_bar)
        return np.asarray(vectors, dtype=np.float32)
