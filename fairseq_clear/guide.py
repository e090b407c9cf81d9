"""The frozen guide model of GISTEmbed's false-negative filter (``--guide-model``).

Any checkpoint the hub loads (including an imported Hugging Face model) scores the batch's
view rows; :func:`fairseq_clear.negatives.guide_mask` turns its similarities into a mask. The
guide is a plain object, not a module of the criterion, so that it is neither trained (fairseq's
optimizer takes the criterion's parameters), nor saved in our checkpoints, nor moved by
``criterion.to()``; it runs in eval mode (no dropout, so it draws no random numbers and a resume
stays bit-exact).
"""

import logging
import os

import torch

from .errors import FairseqClearError
from .gradcache import encode_frozen
from .vocabulary import first_shard

logger = logging.getLogger(__name__)


class GuideModelError(FairseqClearError, ValueError):
    """--guide-model cannot be loaded or does not fit the training data; the message names it."""


def check_trained_dictionary(guide: str, checkpoint: str, data: str) -> None:
    """Refuse a guide checkpoint whose own training data's dict.txt (named in its config) differs from
    ``data``'s: the guide reads the batch's ids, and a dictionary of the same size in another order
    would load without an error and score other tokens. A guide whose training data is not on this
    machine cannot be checked here: it is said in the log, and the sizes are checked when it loads."""
    from fairseq.data import Dictionary

    from .checkpoint_safety import training_task_config

    try:
        trained = str(training_task_config(checkpoint).get("data") or "")
    except Exception:  # noqa: BLE001  (not a readable checkpoint: the hub's loader names the problem)
        return
    theirs = os.path.join(first_shard(trained), "dict.txt") if trained else ""
    ours = os.path.join(data, "dict.txt")
    if not theirs or not os.path.isfile(theirs) or not os.path.isfile(ours):
        logger.warning("--guide-model %s: the data it was trained on (%s) is not on this machine, so its dictionary "
                       "cannot be compared with '%s'; it is read with that one", guide, trained or "not recorded", ours)
        return
    if os.path.samefile(theirs, ours):
        return
    a, b = Dictionary.load(theirs).symbols, Dictionary.load(ours).symbols
    if a != b:
        same = "the same number of symbols, in another order or other ones" if len(a) == len(b) else \
            f"{len(a)} symbols against {len(b)}"
        raise GuideModelError(
            f"--guide-model {guide}: it was trained on '{first_shard(trained)}', whose dict.txt differs from the "
            f"training data's '{ours}' ({same}); the guide scores the batch's token ids, so it must share the "
            "data's dictionary (a guide trained on this data, or data prepared with --tokenizer-from the guide)")


class GuideModel:
    """The guide's vectors of token rows (the batch's own ids: it must share the data's dictionary)."""

    def __init__(self, model, name: str = "the guide"):
        self.model, self.name = model, name
        positions = model.max_positions()
        self.positions = positions if isinstance(positions, int) else None

    @classmethod
    def load(cls, cfg, task):
        """The guide of ``--guide-model`` (None without one)."""
        if not cfg.guide_model:
            return None
        from .models.hub_interface import from_pretrained

        # a fairseq-train save directory has no dict.txt: the guide is read with the training data's, once
        # the dictionary its checkpoint was trained with is known to be the same
        data = cfg.guide_model
        if not os.path.isfile(os.path.join(data, "dict.txt")) and getattr(getattr(task, "cfg", None), "data", None):
            data = first_shard(str(task.cfg.data))
            check_trained_dictionary(cfg.guide_model, os.path.join(cfg.guide_model, cfg.guide_checkpoint), data)
        try:
            hub = from_pretrained(cfg.guide_model, checkpoint_file=cfg.guide_checkpoint,
                                  data_name_or_path=os.path.abspath(data), data_option="--guide-model")
        except FairseqClearError as e:
            raise GuideModelError(f"--guide-model {cfg.guide_model}: {e}") from None
        ours = getattr(getattr(task, "source_dictionary", None), "symbols", None)
        theirs = hub.task.source_dictionary.symbols
        if ours is not None and list(ours) != list(theirs):
            raise GuideModelError(
                f"--guide-model {cfg.guide_model}: its dict.txt ({len(theirs)} symbols) differs from the "
                f"training data's ({len(ours)}); the guide scores the batch's token rows, so it must share the "
                "data's tokenizer (prepare the data with --tokenizer-from the guide, or import a guide that does)")
        for p in hub.model.parameters():
            p.requires_grad_(False)
        hub.model.eval()
        logger.info("guide model %s (frozen; --guide-margin %s, %s)", cfg.guide_model, cfg.guide_margin,
                    cfg.guide_margin_strategy)
        return cls(hub.model, cfg.guide_model)

    @torch.no_grad()
    def vectors(self, src_tokens, chunk_size: int = 0):
        """The guide's sentence vectors of every row of ``src_tokens`` (float32). Rows that are the
        same (SimCSE's two dropout views of a sentence are) are encoded once: the guide has no dropout,
        so a row's vector does not depend on its copies."""
        model = self.model
        if self.positions is not None and src_tokens.size(1) > self.positions:
            # (the rows fairseq batches fit the student's positions, which can exceed the guide's); else an
            # IndexError in the guide's positional embedding
            raise GuideModelError(
                f"--guide-model {self.name}: it reads rows of at most {self.positions} tokens and a batch has a "
                f"row of {src_tokens.size(1)}; give a guide with more positions, or --tokens-per-sample "
                f"{self.positions} (or less)")
        if next(model.parameters()).device != src_tokens.device:
            model.to(src_tokens.device)
        unique, inverse = torch.unique(src_tokens, dim=0, return_inverse=True)
        encode = lambda rows: self._encode(model, rows)  # noqa: E731
        if unique.size(0) < src_tokens.size(0):
            return encode_frozen(encode, unique, chunk_size)[inverse]
        return encode_frozen(encode, src_tokens, chunk_size)

    @staticmethod
    def _encode(model, src_tokens):
        pad = model.encoder.dictionary.pad()
        features = model.sentence_features(src_tokens)
        return model.represent(features, src_tokens.eq(pad)[:, : features.size(1)]).float()
