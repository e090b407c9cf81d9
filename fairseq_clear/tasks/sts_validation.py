"""In-training STS validation: STS-B dev Spearman at every validation round.

``ContrastiveTask`` (tasks/contrastive.py: the base of every task of the plugin) mixes in
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
    embed_batches,
    encode_sentences,
    padded_batches,
    pooling_skip,
    sentence_input,
)
from ..vocabulary import DictionaryEncoder
from ..preprocessing.sts_readers import read_sts_benchmark, spearman, sts_dev_path

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


class StsValidationConfigError(FairseqClearError, ValueError):
    """An --sts-validation option is invalid; the message names it."""


class StsValidator:
    """Spearman x100 of a model's cosine similarities on STS-B-format pairs."""

    def __init__(self, path, tokenizer, dictionary, pooling=None, batch_size=128):
        """``tokenizer``: a :class:`~fairseq_clear.vocabulary.Tokenizer` or a sentencepiece model path."""
        self.path = sts_dev_path(path)
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
        # every distinct sentence is embedded once (STS-B dev: 3,000 sides, 2,910 distinct); the
        # pairs' sides are rows of the distinct sentences' vectors, so a repeated pair ties exactly
        # (two copies embedded in different batches could differ by float noise and break the tie)
        row = {}
        self.rows = np.array([row.setdefault(s, len(row)) for s in self.pairs.sent1 + self.pairs.sent2],
                             dtype=np.int64)
        self.sentences = list(row)
        self._batches = None  # (key, padded batches): tokenised and cut once, reused by every score()
        logger.info("STS validation: %d pairs from %s", len(self.pairs), self.path)

    def batches(self, model):
        """The distinct sentences tokenised, cut by length and padded for ``model``: built at the
        first validation, then reused (a model that reads sentences otherwise, or pads otherwise, gets its own)."""
        # the model's prompt, lower-casing and length, as embed() reads a sentence
        key = (sentence_input(model), model.encoder.dictionary.pad())
        if self._batches is None or self._batches[0] != key:
            tokens = encode_sentences(self.tokenizer, model, self.sentences)[0]
            self._batches = key, list(padded_batches(tokens, key[1], self.batch_size))
        return self._batches[1]

    def score(self, model) -> float:
        """Spearman x100 for ``model`` (dropout off, no gradient; the mode is restored)."""
        start = time.time()
        pooling = self.pooling or model.args.sentence_pooling
        try:
            vectors = embed_batches(model, self.batches(model), len(self.sentences), (pooling,),
                                    skip=pooling_skip(self.tokenizer, model))[pooling]
        except NonFiniteVectorsError as e:
            # the worst Spearman there is: a broken model is never kept as the best checkpoint
            logger.error("STS-B dev (%s pooling): %s; scored %.0f", pooling, e, WORST_SCORE)
            return WORST_SCORE
        vectors = vectors[torch.from_numpy(self.rows)]
        n = len(self.pairs)
        value = spearman(cosine_rows(vectors[:n], vectors[n:]), self.pairs.scores)
        if np.isnan(value):
            value = 0.0  # every similarity equal (e.g. a collapsed model): no rank information
        logger.info("STS-B dev (%s pooling): Spearman %.2f (%.1f s)", pooling, value, time.time() - start)
        return float(value)


class StsValidationMixin:
    """Task hooks for ``--sts-validation``; put it before the fairseq task in the bases.

    Never silently worse: in a fairseq-train run the starting model is scored before the first
    update (``begin_epoch``). With ``--best-checkpoint-metric sts_b_spearman
    --maximize-best-checkpoint-metric`` its weights are written as checkpoint_best.pt and its
    score becomes fairseq's best so far (``checkpoint_utils.save_checkpoint.best``, which fairseq
    itself keeps), so a checkpoint replaces it only when it scores at least as well. When the
    run ends one line says ``start X -> best Y (update N), last Z``, whether anything beat
    the start, and every score (``every score: 0: X, 125: ...``). A resumed run keeps the start's
    score and the scores before the stop (in the checkpoint: :meth:`sts_checkpoint_dict`).
    """

    _sts_validator = None
    _sts_score = None
    _sts_start = None
    _sts_history = ()
    _sts_start_checked = False
    _sts_keeps_start = False
    _updates_done = 0

    def init_sts_validation(self, cfg):
        """Build the validator at start-up (bad options fail here, naming the option)."""
        self._sts_validator = None
        self._sts_score = None
        self._sts_history = []
        if getattr(cfg, "sts_validation", ""):
            self._sts_validator = StsValidator(
                cfg.sts_validation,
                self.data_tokenizer("--sts-validation"),
                self.source_dictionary,
                pooling=getattr(cfg, "sts_validation_pooling", "") or None,
                batch_size=getattr(cfg, "sts_validation_batch_size", 128),
            )
            from ..fairseq_fixes import scope

            scope.at_end(self.log_sts_summary)
            # fairseq asks a task with get_checkpoint_dict for state to keep in every checkpoint's
            # extra_state (and logs that it did): only runs that score STS-B dev have any
            self.get_checkpoint_dict = self.sts_checkpoint_dict

    # ---- a resumed run keeps the start's score and the scores before the stop. fairseq's trainer
    # saves task.state_dict() as task_state but never restores it on resume; fairseq's
    # checkpoint_utils.load_checkpoint hands the task its own part of extra_state instead
    # (``extra_state[type(task).__name__]`` -> task.set_checkpoint_dict), written from
    # task.get_checkpoint_dict() at each save. Plain Python types only (weights_only=True).
    def sts_checkpoint_dict(self) -> dict:
        record = {"start": self._sts_start, "keeps_start": bool(self._sts_keeps_start),
                  "history": [[int(u), float(s)] for u, s in self._sts_history]}
        return {type(self).__name__: {"sts_validation": record}}

    def set_checkpoint_dict(self, state: dict) -> None:
        record = (state or {}).get("sts_validation")
        if not record or self._sts_validator is None:
            return
        start = record.get("start")
        self._sts_start = None if start is None else float(start)
        self._sts_keeps_start = bool(record.get("keeps_start"))
        self._sts_history = [(int(u), float(s)) for u, s in record.get("history", [])]
        logger.info("STS-B dev scores of the run so far, restored from the checkpoint: %s", _scores(self._sts_history))

    def begin_epoch(self, epoch, model):
        super().begin_epoch(epoch, model)
        if self._sts_validator is not None and not self._sts_start_checked:
            self._sts_start_checked = True
            self.score_start(model)

    def score_start(self, model):
        """Score the model before its first update; keep it as checkpoint_best.pt (see the class)."""
        from fairseq import checkpoint_utils

        from ..fairseq_fixes import scope

        run = scope.run_config()
        if run is None or hasattr(checkpoint_utils.save_checkpoint, "best"):
            return  # not a fairseq-train run, or a resumed one: fairseq restored its best score
        # rounded as fairseq rounds the logged metric (round=2) that it compares with the best so far
        self._sts_start = score = round(self._sts_validator.score(model), 2)
        # a run that resumed with --reset-meters (fairseq forgot its best) starts its record anew too
        self._sts_history = [(self._updates_done, score)]
        ck = run.checkpoint
        if ck.best_checkpoint_metric != METRIC or not ck.maximize_best_checkpoint_metric:
            logger.info("STS-B dev of the starting model: %.2f; checkpoint_best.pt follows --best-checkpoint-metric "
                        "%s (pass --best-checkpoint-metric %s --maximize-best-checkpoint-metric to keep the start "
                        "when no checkpoint beats it)", score, ck.best_checkpoint_metric, METRIC)
            return
        checkpoint_utils.save_checkpoint.best = score  # fairseq's own record of the best so far
        self._sts_keeps_start = True
        if ck.no_save or not _is_first_rank():
            return
        path = os.path.join(ck.save_dir, f"checkpoint_best{ck.checkpoint_suffix or ''}.pt")
        _save_start(run, model, path, score, self.sts_checkpoint_dict())
        logger.info("STS-B dev of the starting model: %.2f, saved as %s: a checkpoint replaces it only when "
                    "it scores at least as well", score, path)

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        self._updates_done = update_num + 1
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def begin_valid_epoch(self, epoch, model):
        super().begin_valid_epoch(epoch, model)
        if self._sts_validator is not None:
            self._sts_score = self._sts_validator.score(model)
            self._sts_history.append((self._updates_done, self._sts_score))

    def sts_summary(self) -> str:
        """``STS-B dev Spearman: start X -> best Y (update N), last Z`` over this run's scores."""
        history = list(self._sts_history)
        if not history:
            return ""
        start = self._sts_start
        # fairseq replaces checkpoint_best.pt on a tie: the last of the best scores is the one it holds
        best_updates, best = max(reversed(history), key=lambda h: h[1])
        last_updates, last = history[-1]
        line = (f"STS-B dev Spearman: start {'%.2f' % start if start is not None else 'not scored'} -> best "
                f"{best:.2f} (update {best_updates}), last {last:.2f} (update {last_updates})")
        if start is not None and all(s < start for _, s in history[1:]):
            line += ("; nothing beat the start: " + ("checkpoint_best.pt holds the starting model"
                                                     if self._sts_keeps_start else "every checkpoint is worse"))
        return line + "; every score: " + _scores(history)

    def log_sts_summary(self):
        line = self.sts_summary()
        if line:
            logger.info(line)

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


def _scores(history) -> str:
    """``0: 78.90, 125: 79.31, ...`` (update: Spearman x100)."""
    return ", ".join(f"{u}: {s:.2f}" for u, s in history)


def _is_first_rank() -> bool:
    return not (torch.distributed.is_available() and torch.distributed.is_initialized()) \
        or torch.distributed.get_rank() == 0


def _save_start(run, model, path, score, task_state=None):
    """The starting model as a fairseq checkpoint (trainer.state_dict's layout, no optimizer state)."""
    from fairseq import checkpoint_utils, utils
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(run, resolve=True, enum_to_str=True) if OmegaConf.is_config(run) else run
    state = {
        "args": None, "cfg": cfg, "model": utils.move_to_cpu(model.state_dict()), "criterion": None,
        "optimizer_history": [{"criterion_name": "start", "optimizer_name": "start",
                               "lr_scheduler_state": {"best": score}, "num_updates": 0}],
        "task_state": {},
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "shuffle": True},
                        "val_loss": score, "best": score, "start": True, **(task_state or {})},
        "last_optimizer_state": None,
    }
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    checkpoint_utils.torch_persistent_save(state, path)


def _as_float(x) -> float:
    if torch.is_tensor(x):
        return float(x.item())
    return float(x)
