"""The base of the contrastive tasks ``clear``, ``declutr`` and ``contrastive_pairs``.

It holds what the three share and nothing a paper adds: the dictionary and split
loading (with the damaged-data checks), fairseq's masking of RoBERTa's MLM, the batching
policy (``--batch-composition``), the batch iterator, STS validation and one error type.

Options are resolved once, from the mode's published values (``paper_defaults.py``): the
task's own when it is set up, the model's in :meth:`ContrastiveTask.build_model` and the
criterion's in :meth:`ContrastiveTask.build_criterion`, where fairseq builds each.

The task -> criterion contract is the batch (docs/design.md) and these attributes:

* ``is_contrastive``: whether batches carry a ``contrastive`` part (the model builds its head);
* ``uses_hard_negatives``: whether that part holds hard negatives (only ``--loss-form simcse``
  uses them);
* ``step``: the :class:`Step` in progress while ``train_step`` runs (None otherwise).

fairseq's ``masked_lm`` options that no contrastive task honours are refused at start-up
when set (``NOT_HONOURED``); a task adds its own refusals the same way.
"""

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from fairseq import utils
from fairseq.data import Dictionary, MaskTokensDataset
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from .. import paper_defaults
from ..checkpoint_sizes import out_of_bounds
from ..data.binarized_checks import load_checked, load_dictionary as load_dictionary_file
from .sts_validation import HELP as STS_VALIDATION_HELP, StsValidationMixin
from ..fairseq_fixes.keep_last_batch import keeping_last_batch
from ..errors import FairseqClearError

logger = logging.getLogger(__name__)

BATCH_COMPOSITIONS = ("auto", "length", "random")
MLM_CHOICES = ("auto", "on", "off")

#: seeds of a sample's independent maskings (Double-MLM's second one, DeCLUTR's anchors,
#: the columns of a pair) are the run's seed plus multiples of this prime
MASK_SEED_STRIDE = 7919

#: fairseq masked_lm options that no contrastive task reads: whole-word and span masking,
#: shortening, and data2vec's flags
NOT_HONOURED = (
    "mask_whole_words", "mask_multiple_length", "mask_stdev", "shorten_method",
    "shorten_data_split_list", "include_target_tokens", "include_index", "skip_masking",
    "d2v2_multi",
)


class TaskConfigError(FairseqClearError, ValueError):
    """A task option or data file is invalid; the message names the option or file."""


@dataclass(frozen=True)
class Step:
    """The ``train_step`` in progress: the one piece of the task's state the criterion reads.

    ``index``/``count``: this micro-batch's place in its update; ``count`` is None outside
    fairseq's trainer, which alone knows the update's group (fairseq_fixes/update_group.py), and
    ``--accumulate-contrastive`` then treats each micro-batch as its own problem. ``stand_in``:
    fairseq's stand-in batch of a rank that ran out of data (``ignore_grad``): its own terms
    count zero, but it takes part in the collectives and lends no views to the other ranks.
    """

    index: int = 0
    count: Optional[int] = None
    stand_in: bool = False


@dataclass
class ContrastiveConfig(MaskedLMConfig):
    tokens_per_sample: int = field(
        default=512,
        metadata={
            "help": "longest sample in tokens, <s> and </s> included (paper: 512); longer "
            "sentences are truncated and counted in the log"
        },
    )
    batch_composition: str = field(
        default="auto",
        metadata={
            "help": "which samples share a batch, i.e. each other's negatives: 'length' = sorted by "
            "length, shuffled among equal lengths, regrouped every epoch (fairseq masked_lm's "
            "order, which CLEAR's RoBERTa recipe used; least padding); 'random' = a fresh random "
            "order every epoch (SimCSE's, DeCLUTR's and CLSR's trainers); 'auto' = the mode's "
            "paper: length for CLEAR, random for SimCSE, DeCLUTR and pairs"
        },
    )
    mlm: str = field(
        default="auto",
        metadata={
            "help": "the masked LM loss: on, off, or auto = the mode's paper (on for CLEAR and "
            "DeCLUTR, off for SimCSE and CLSR); '--mlm' alone means on",
            "argparse_const": "on",
        },
    )
    mlm_only: bool = field(
        default=False,
        metadata={
            "help": "MLM-only baseline (§5.1): no views and no contrastive loss, on the "
            "same data, model and criterion (with a doubled --batch-size: Double-batch)"
        },
    )
    no_mlm: bool = field(
        default=False,
        metadata={"help": "deprecated: --mlm off (train the contrastive loss alone)"},
    )
    # in-training STS-B validation (fairseq_clear/tasks/sts_validation.py)
    sts_validation: str = field(default="", metadata={"help": STS_VALIDATION_HELP["sts_validation"]})
    sts_validation_pooling: str = field(
        default="", metadata={"help": STS_VALIDATION_HELP["sts_validation_pooling"]}
    )
    sts_validation_batch_size: int = field(
        default=128, metadata={"help": STS_VALIDATION_HELP["sts_validation_batch_size"]}
    )


def data_paths(data: str):
    """fairseq's ':'-separated data shards, except that an existing directory is one path ('run:1/data')."""
    if data and os.path.isdir(data):
        return [data]
    return utils.split_paths(data)


def load_dictionary(data: str) -> Dictionary:
    paths = data_paths(data)
    if not paths:
        raise TaskConfigError("no data directory given")
    path = os.path.join(paths[0], "dict.txt")
    if not os.path.isdir(paths[0]):
        raise TaskConfigError(f"data directory '{paths[0]}' does not exist: make it with clear-prepare "
                              "CORPUS OUT (it writes OUT/data-bin)")
    if not os.path.isfile(path):
        raise TaskConfigError(
            f"data directory '{paths[0]}' has no dict.txt: make it with clear-prepare CORPUS OUT "
            "(OUT/data-bin), or binarize with fairseq-preprocess --only-source --srcdict"
        )
    dictionary = load_dictionary_file(path)
    dictionary.path = path  # named in size-mismatch errors
    return dictionary


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


class ContrastiveTask(StsValidationMixin, MaskedLMTask):
    """Shared plumbing of the contrastive tasks; subclasses add their paper's samples."""

    #: the task's registered name and dataclass (for messages and defaults)
    name = "contrastive"
    config_class = ContrastiveConfig
    #: fields of the config this task refuses when set (see NOT_HONOURED)
    not_honoured = NOT_HONOURED
    #: training-only options that may name files of the training machine; the hub loads a
    #: checkpoint for inference with these values
    inference_overrides = {"sts_validation": ""}

    uses_hard_negatives = False
    #: the mode whose published values fill unset options (paper_defaults.MODES)
    paper = "clear"
    #: the train_step in progress (read by the criterion), None outside one
    step = None

    def __init__(self, cfg, dictionary=None):
        self.cfg = cfg  # paper_mode may read it before fairseq's __init__ sets it
        self.check_honoured(cfg)
        problem = out_of_bounds(cfg, self.config_class)  # the ranges written next to the options
        if problem:
            raise TaskConfigError("--{} {!r}: {}".format(problem[0].replace("_", "-"), *problem[1:]))
        if cfg.mlm not in MLM_CHOICES:
            raise TaskConfigError(f"--mlm must be one of {', '.join(MLM_CHOICES)}, got '{cfg.mlm}'")
        if cfg.no_mlm:
            if cfg.mlm == "on":
                raise TaskConfigError("--no-mlm (deprecated: --mlm off) contradicts --mlm on")
            logger.warning("--no-mlm is deprecated: pass --mlm off")
            cfg.no_mlm, cfg.mlm = False, "off"
        if cfg.tokens_per_sample < 3:
            raise TaskConfigError(f"--tokens-per-sample must be >= 3, got {cfg.tokens_per_sample}")
        if cfg.batch_composition not in BATCH_COMPOSITIONS:
            raise TaskConfigError(
                f"--batch-composition must be one of {', '.join(BATCH_COMPOSITIONS)}, got '{cfg.batch_composition}'"
            )
        if cfg.mlm_only and cfg.mlm == "auto":
            # MLM is the only loss: never the mode's paper's 'off' (a checkpoint loaded for inference
            # gets --augmentations none, which would make CLEAR's mode SimCSE's)
            cfg.mlm = "on"
        paper_defaults.fill(cfg, paper_defaults.TASK_OPTIONS, self.paper_mode(), f"task {self.name}")
        if cfg.mlm == "off" and cfg.mlm_only:
            raise TaskConfigError("--mlm off with --mlm-only leaves no loss to train")
        check_masking(cfg, used=cfg.mlm == "on")
        super().__init__(cfg, dictionary)  # adds <mask>
        self.init_sts_validation(cfg)  # --sts-validation (StsValidationMixin)
        self._update_size = None
        self._update_index = 0

    @classmethod
    def check_honoured(cls, cfg):
        """Refuse, naming it, an option of this task's config that the task does not read."""
        defaults = {f.name: f.default for f in dataclasses.fields(cls.config_class)}
        for name in cls.not_honoured:
            if name in defaults and hasattr(cfg, name) and getattr(cfg, name) != defaults[name]:
                raise TaskConfigError(
                    f"{_option(name)} is not used by --task {cls.name} (got {getattr(cfg, name)!r}, "
                    f"default {defaults[name]!r}); leave it out"
                )

    @property
    def uses_mlm(self) -> bool:
        """Whether batches carry MLM input and targets."""
        return self.cfg.mlm == "on"

    @property
    def is_contrastive(self) -> bool:
        return not self.cfg.mlm_only

    def paper_mode(self, model_cfg=None) -> str:
        """Whose published values fill unset options (a key of paper_defaults.MODES); a task
        whose paper depends on its options or on the model's (CLSR: --freeze-encoder) says so here."""
        return self.paper

    # ---- where fairseq builds the model and the criterion: their unset options resolved
    def build_model(self, cfg, from_checkpoint=False):
        from ..models.pooling import own_pooling

        own_pooling(cfg)  # a sentence-embedding model keeps its own pooling over the paper's
        paper_defaults.fill(cfg, paper_defaults.MODEL_OPTIONS, self.paper_mode(cfg), "model")
        self.model_mode = self.paper_mode(cfg)  # the criterion's values follow the model's mode
        self.check_continued_lr(cfg)
        model = super().build_model(cfg, from_checkpoint)
        if self.is_contrastive and hasattr(model, "representation_dim"):
            # the size of the vectors the contrastive loss compares (--matryoshka-dims is checked against it)
            head = "projection" if getattr(model, "projection_head", None) is not None else "representation"
            self.contrastive_dim, self.contrastive_head = model.representation_dim(head), head
        #: whether --sentence-mlm-weight has its decoder (the criterion, built next, checks it at start-up)
        self.model_has_sentence_decoder = getattr(model, "sentence_decoder", None) is not None
        return model

    #: the recipe (continued.CONTINUED) whose continued-training values a paper mode follows
    continued_modes = {"simcse": "simcse-unsup"}

    def check_continued_lr(self, model_cfg) -> None:
        """In a fairseq-train run (not through a recipe, which picks the paper's values): one warning
        when a pre-trained model (--pretrained-kind, what clear-import-hf recorded) is continued at an
        lr far above the paper's for continued training (continued.lr_warning)."""
        from .. import continued
        from ..fairseq_fixes import scope

        run = scope.run_config()  # the whole fairseq-train config (None outside a run: the hub)
        if run is None or getattr(self, "_lr_checked", False):
            return
        self._lr_checked = True
        lrs = list(getattr(getattr(run, "optimization", None), "lr", None) or [])
        if not lrs:
            return
        mode = self.continued_modes.get(self.model_mode, self.model_mode)
        criterion = getattr(run, "criterion", None)
        distilling = bool(getattr(criterion, "distill_weight", 0) or getattr(criterion, "distill_mse_weight", 0))
        message = continued.lr_warning(mode, getattr(model_cfg, "pretrained_kind", None),
                                       getattr(model_cfg, "encoder_embed_dim", None), max(float(x) for x in lrs),
                                       distilling)
        if message:
            logger.warning(message)

    def build_criterion(self, cfg, from_checkpoint=False):
        mode = getattr(self, "model_mode", None) or self.paper_mode()
        paper_defaults.fill(cfg, paper_defaults.CRITERION_OPTIONS, mode, "criterion")
        return super().build_criterion(cfg, from_checkpoint)

    # ---- dictionary ------------------------------------------------------------
    @classmethod
    def dictionary_for(cls, cfg) -> Dictionary:
        """The dictionary of the data in ``cfg.data`` (fairseq's ``load_dictionary`` takes a file)."""
        return load_dictionary(cfg.data)

    @classmethod
    def data_error(cls, cfg):
        """What keeps this task from reading a dictionary from ``cfg.data`` (fairseq_fixes/run.py
        ends the command with it before fairseq builds the task), or None; a damaged dict.txt
        stays the task's error, named as fairseq builds it."""
        try:
            cls.dictionary_for(cfg)
        except TaskConfigError as e:
            return str(e)
        return None

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        from ..fairseq_fixes import scope

        scope.component_built(cfg, f"task {cls.__name__}")  # inside a fairseq command: the run is ours
        dictionary = cls.dictionary_for(cfg)
        logger.info("dictionary: %d types", len(dictionary))
        return cls(cfg, dictionary)

    @classmethod
    def load_dict(cls, cfg):
        return cls.dictionary_for(cfg)

    # ---- tokenizer ---------------------------------------------------------------
    @property
    def tokenizer_file(self) -> str:
        """A tokenizer file given on the command line (clear's --sentencepiece-model), else ''."""
        return ""

    def data_tokenizer(self, option: str = "subs"):
        """The tokenizer that made the data (for subs and --sts-validation): ``tokenizer_file``,
        else the data directory's own (clear_tokenizer.json, sentencepiece.model, encoder.json +
        vocab.bpe, or vocab.txt)."""
        from .. import vocabulary

        try:
            return vocabulary.find(data_paths(self.cfg.data)[0], option, self.tokenizer_file)
        except vocabulary.TokenizerError as e:
            raise TaskConfigError(
                f"{e} (it needs the tokenizer that made the data: pass --sentencepiece-model or "
                "prepare the data with clear-prepare)") from None

    # ---- data ------------------------------------------------------------------
    def split_path(self, split: str, epoch: int = 1, subdir: Optional[str] = None) -> str:
        paths = data_paths(self.cfg.data)
        root = paths[(epoch - 1) % len(paths)]
        return os.path.join(root, subdir, split) if subdir else os.path.join(root, split)

    def load_lines(self, split_path: str, combine=False, missing: Optional[str] = None):
        """The checked binarized lines at ``split_path`` (FileNotFoundError naming it if absent)."""
        lines = load_checked(split_path, self.source_dictionary, combine=combine)
        if lines is None:
            split = os.path.basename(split_path)
            raise FileNotFoundError(missing or (
                f"split '{split}' not found: no {split_path}.bin/.idx (run fairseq-preprocess "
                f"with --{split}pref, or pass --valid-subset)"
            ))
        return lines

    def mask(self, sentences, slot: int = 0):
        """fairseq's RoBERTa masking of ``sentences``; each ``slot`` is an independent masking."""
        return MaskTokensDataset.apply_mask(
            sentences,
            self.source_dictionary,
            pad_idx=self.source_dictionary.pad(),
            mask_idx=self.mask_idx,
            seed=self.cfg.seed + MASK_SEED_STRIDE * slot,
            mask_prob=self.cfg.mask_prob,
            leave_unmasked_prob=self.cfg.leave_unmasked_prob,
            random_token_prob=self.cfg.random_token_prob,
            freq_weighted_replacement=self.cfg.freq_weighted_replacement,
        )

    def batch_sizes_for_order(self, sizes):
        """``sizes`` when batches are composed by length, else None (random batches)."""
        composition = self.cfg.batch_composition  # resolved from the paper in __init__
        if not getattr(self, "_logged_composition", False):
            self._logged_composition = True
            logger.info("batch composition: %s", composition)
        return sizes if composition == "length" else None

    def get_batch_iterator(self, dataset, *args, **kwargs):
        with keeping_last_batch(dataset):  # fairseq drops it: see fairseq_fixes/keep_last_batch.py
            itr = super().get_batch_iterator(dataset, *args, **kwargs)
        # --num-workers > 0: a worker holds the copy of the dataset made when it
        # started, so fairseq's reused, persistent DataLoader would keep epoch 1's
        # views and masks for ever, while a resumed run starts workers at the
        # right epoch and diverges. A fresh loader per epoch sees set_epoch().
        itr.reuse_dataloader = False
        itr.persistent_workers = False
        return itr

    def begin_update(self, num_micro_batches: int):
        """Called by fairseq's trainer before an update's micro-batches (fairseq_fixes/update_group.py)."""
        self._update_size, self._update_index = num_micro_batches, 0

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        index, count = self._update_index, self._update_size
        if count is not None:
            self._update_index += 1
            if self._update_index == count:  # the update's last: later calls are outside it
                self._update_size = None
        self.step = Step(index, count, stand_in=bool(ignore_grad))
        try:
            # the criterion zeroes a stand-in batch's own terms (Step.stand_in); fairseq's
            # ignore_grad (loss * 0) would also zero the contrastive term that
            # --accumulate-contrastive computes over the whole update when the stand-in comes last
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad=False)
        finally:
            self.step = None

    def max_positions(self):
        return self.cfg.tokens_per_sample


def check_masking(cfg, used: bool = True):
    """fairseq's MaskTokensDataset asserts these (a bare AssertionError otherwise)."""
    for name in ("mask_prob", "leave_unmasked_prob", "random_token_prob"):
        value = getattr(cfg, name)
        if not 0.0 <= value <= 1.0:
            raise TaskConfigError(f"{_option(name)} must be in [0, 1], got {value}")
    if used and not 0.0 < cfg.mask_prob < 1.0:
        raise TaskConfigError(
            f"--mask-prob must be strictly between 0 and 1 (paper: 0.15), got {cfg.mask_prob}; "
            "to train without masked-LM pass --no-mlm"
        )
    if cfg.leave_unmasked_prob + cfg.random_token_prob > 1.0:
        raise TaskConfigError(
            f"--leave-unmasked-prob + --random-token-prob must be at most 1 (paper: 0.1 + 0.1), got "
            f"{cfg.leave_unmasked_prob} + {cfg.random_token_prob}"
        )
