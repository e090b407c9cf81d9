"""In-training STS validation: STS-B dev Spearman at every validation round.

``ClearTask`` (and so every task derived from it) mixes in
:class:`StsValidationMixin`. With ``--sts-validation PATH`` it embeds the
STS-B dev pairs once per validation round (fairseq calls
``task.begin_valid_epoch`` before the valid batches) and logs the Spearman x100
of their cosine similarities as ``sts_b_spearman`` among the valid stats, so

    fairseq-train ... --sts-validation STSBenchmark/sts-dev.csv \\
        --best-checkpoint-metric sts_b_spearman --maximize-best-checkpoint-metric

keeps as checkpoint_best.pt the checkpoint with the best sentence embeddings.

The score enters fairseq's metrics through ``valid_step``'s logging output
as a sum and a count, so it survives fairseq's summing of logging outputs
over batches and ranks (every rank computes the same value), and is logged
as a plain Python float (checkpoints are loaded with weights_only=True).
"""

import logging
import os
import time

import numpy as np
import torch
from fairseq import metrics

from ..errors import FairseqClearError
from ..models.inference import (
    NonFiniteVectorsError,
    SentencepieceDictionaryEncoder,
    check_pooling,
    cosine_rows,
    embed_tokens,
)
from ..vocabulary import DictionaryEncoder
from .sts import read_sts_benchmark, spearman

logger = logging.getLogger(__name__)

METRIC = "sts_b_spearman"
#: the score of a model whose vectors are not finite (the lowest Spearman x100)
WORST_SCORE = -100.0
_SUM, _COUNT = "_sts_b_spearman_sum", "_sts_b_spearman_count"

#: help strings of the task options (ClearConfig declares the fields)
HELP = {
    "sts_validation": "STS-B dev file (sts-dev.csv, or the STSBenchmark directory holding it): "
    "at every validation, embed its pairs and log their Spearman x100 as sts_b_spearman; "
    "use with --best-checkpoint-metric sts_b_spearman --maximize-best-checkpoint-metric "
    "(default: off)",
    "sts_validation_pooling": "pooling for --sts-validation: cls or mean "
    "(default: the model's --sentence-pooling)",
    "sts_validation_batch_size": "sentences per forward pass for --sts-validation (default: 128)",
}


def resolve_sts_validation_path(path: str) -> str:
    if os.path.isdir(path):
        path = os.path.join(path, "sts-dev.csv")
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise StsValidationConfigError(
            f"--sts-validation: cannot read '{path}' (give STS-B's sts-dev.csv or its directory)"
        )
    return path


class StsValidationConfigError(FairseqClearError, ValueError):
    """An --sts-validation option is invalid; the message names it."""


class StsValidator:
    """Spearman x100 of a model's cosine similarities on STS-B-format pairs."""

    def __init__(self, path, tokenizer, dictionary, pooling=None, batch_size=128):
        """``tokenizer``: a :class:`~fairseq_clear.vocabulary.Tokenizer` or a sentencepiece model path."""
        self.path = resolve_sts_validation_path(path)
        if pooling:
            check_pooling(pooling)
        if batch_size < 1:
            raise StsValidationConfigError(f"--sts-validation-batch-size must be >= 1, got {batch_size}")
        if isinstance(tokenizer, str) and not os.path.isfile(tokenizer):
            raise StsValidationConfigError(
                f"--sts-validation needs the sentencepiece model to tokenise the STS sentences: "
                f"'{tokenizer}' does not exist (see --sentencepiece-model)"
            )
        self.pairs = read_sts_benchmark(self.path)  # malformed lines stop start-up, with file:line
        if len(self.pairs) < 2:
            raise StsValidationConfigError(f"--sts-validation: '{self.path}' has fewer than 2 pairs")
        if isinstance(tokenizer, str):
            self.tokenizer = SentencepieceDictionaryEncoder(tokenizer, dictionary)
        else:
            self.tokenizer = DictionaryEncoder(tokenizer, dictionary)
        self.pooling = pooling or None
        self.batch_size = batch_size
        self._tokens = None
        logger.info("STS validation: %d pairs from %s", len(self.pairs), self.path)

    def score(self, model) -> float:
        """Spearman x100 for ``model`` (dropout off, no gradient; the mode is restored)."""
        start = time.time()
        if self._tokens is None:
            # tokenise once; the model's max positions do not change during training
            self._tokens = self.tokenizer.encode(
                self.pairs.sent1 + self.pairs.sent2, max_positions=model.max_positions()
            )
        pooling = self.pooling or model.args.sentence_pooling
        try:
            vectors = embed_tokens(model, self._tokens, (pooling,), batch_size=self.batch_size)[pooling]
        except NonFiniteVectorsError as e:
            # the worst Spearman there is: a broken model is never kept as the best checkpoint
            logger.error("STS-B dev (%s pooling): %s; scored %.0f", pooling, e, WORST_SCORE)
            return WORST_SCORE
        n = len(self.pairs)
        value = spearman(cosine_rows(vectors[:n], vectors[n:]), self.pairs.scores)
        if np.isnan(value):
            value = 0.0  # every similarity equal (e.g. a collapsed model): no rank information
        logger.info("STS-B dev (%s pooling): Spearman %.2f (%.1f s)", pooling, value, time.time() - start)
        return float(value)


class StsValidationMixin:
    """Task hooks for ``--sts-validation``; put it before the fairseq task in the bases."""

    _sts_validator = None
    _sts_score = None

    def init_sts_validation(self, cfg):
        """Build the validator at start-up (bad options fail here, naming the option)."""
        self._sts_validator = None
        self._sts_score = None
        if getattr(cfg, "sts_validation", ""):
            self._sts_validator = StsValidator(
                cfg.sts_validation,
                self.data_tokenizer("--sts-validation"),
                self.source_dictionary,
                pooling=getattr(cfg, "sts_validation_pooling", "") or None,
                batch_size=getattr(cfg, "sts_validation_batch_size", 128),
            )

    def begin_valid_epoch(self, epoch, model):
        super().begin_valid_epoch(epoch, model)
        if self._sts_validator is not None:
            self._sts_score = self._sts_validator.score(model)

    def valid_step(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        if self._sts_score is not None:
            logging_output[_SUM] = self._sts_score
            logging_output[_COUNT] = 1.0
        return loss, sample_size, logging_output

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        count = sum(_as_float(log.get(_COUNT, 0.0)) for log in logging_outputs)
        if count > 0:
            total = sum(_as_float(log.get(_SUM, 0.0)) for log in logging_outputs)
            metrics.log_scalar(METRIC, total / count, 1, round=2)


def _as_float(x) -> float:
    if torch.is_tensor(x):
        return float(x.item())
    return float(x)
