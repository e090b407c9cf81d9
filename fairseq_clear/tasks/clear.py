"""Task ``clear``: augmented contrastive denoising (Wu et al. 2020, §3).

Each sample is one sentence s of a fairseq-preprocess'ed split. The task
yields (a) RoBERTa's MLM input and targets for s, made by fairseq's own
``MaskTokensDataset`` (15% of tokens; 80% ``<mask>`` / 10% random / 10% kept),
and (b) two views s~1 = AUG(s, seed1), s~2 = AUG(s, seed2) made with the same
augmentation composition (``--augmentations``) or, with
``--augmentation-mix``, each drawing its own composition.
"""

import logging
import os
from dataclasses import dataclass, field
import numpy as np
from fairseq import utils
from fairseq.data import (
    Dictionary,
    IdDataset,
    MaskTokensDataset,
    NestedDictionaryDataset,
    NumelDataset,
    NumSamplesDataset,
    RightPadDataset,
)
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from ..data.binarized_checks import load_checked
from .. import augmentations as aug
from ..data import ContrastiveViewsDataset, EpochShuffledDataset, SentenceDataset
from ..fairseq_fixes.keep_last_batch import keeping_last_batch
from ..evaluation.sts_validation import HELP as STS_VALIDATION_HELP, StsValidationMixin

logger = logging.getLogger(__name__)

from ..vocabulary import DEL_SYMBOL  # noqa: E402  (re-exported: tasks.clear.DEL_SYMBOL)


BATCH_COMPOSITIONS = ("auto", "length", "random")


class ClearConfigError(ValueError):
    """A task option is invalid; the message names the option or file."""


@dataclass
class ClearConfig(MaskedLMConfig):
    sample_break_mode: str = field(
        default="eos",
        metadata={"help": "must be 'eos': CLEAR's samples are single sentences (one line each)"},
    )
    tokens_per_sample: int = field(
        default=512,
        metadata={
            "help": "longest sample in tokens, <s> and </s> included (paper: 512); longer "
            "sentences are truncated and counted in the log"
        },
    )
    augmentations: str = field(
        default="del-word",
        metadata={
            "help": "augmentation composition AUG for both views, applied in the order "
            "written, e.g. 'del-word', 'subs,del-span', 'del-span,reorder' (Table 1). "
            "Names: del-word, del-span, reorder, subs, and none/dropout (identity: "
            "dropout is the only noise, SimCSE)"
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
    augmentation_mix: str = field(
        default="",
        metadata={
            "help": "mixed augmentations (the paper's future work): each view draws its "
            "composition from 'comp:prob;comp:prob', e.g. 'del-word:0.5;subs,del-span:0.5'. "
            "Overrides --augmentations"
        },
    )
    del_word_rate: float = field(
        default=0.7, metadata={"help": "del-word: share of tokens replaced by [DEL] (paper: 0.7)"}
    )
    del_span_count: int = field(
        default=5, metadata={"help": "del-span: number of spans deleted (paper: 5); short sentences lose fewer spans so that the expected deleted share stays count x ratio (25%)"}
    )
    del_span_ratio: float = field(
        default=0.05,
        metadata={"help": "del-span: length of each span as a share of the sentence, rounded up to whole tokens (paper: 0.05)"},
    )
    reorder_pairs: int = field(
        default=5, metadata={"help": "reorder: number of span pairs swapped (paper: 5); fewer in short sentences, keeping the expected moved share at 2 x pairs x ratio"}
    )
    reorder_span_ratio: float = field(
        default=0.05,
        metadata={"help": "reorder: length of each span as a share of the sentence, rounded up to whole tokens (paper: ~0.05)"},
    )
    subs_rate: float = field(
        default=0.3,
        metadata={
            "help": "subs: share of words replaced by a synonym (paper: 0.3); words "
            "without a synonym stay"
        },
    )
    synonym_table: str = field(
        default="",
        metadata={
            "help": "subs: JSON object word -> [synonyms] (e.g. the counter-fitted "
            "neighbours of Jia et al. 2019, or one built from WordNet by "
            "clear-synonyms); required when 'subs' is used"
        },
    )
    sentencepiece_model: str = field(
        default="",
        metadata={
            "help": "subs: the corpus's sentencepiece model, to tokenise synonyms "
            "(default: DATA/sentencepiece.model)"
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
        metadata={
            "help": "leave out the masked LM loss and train the contrastive loss alone "
            "(SimCSE unsupervised); CLEAR and DeCLUTR keep it"
        },
    )
    double_mlm: bool = field(
        default=False,
        metadata={
            "help": "Double-MLM baseline (§5.1): add a second, independent masking of "
            "each sentence with its own MLM loss"
        },
    )
    # in-training STS-B validation (fairseq_clear/evaluation/sts_validation.py)
    sts_validation: str = field(default="", metadata={"help": STS_VALIDATION_HELP["sts_validation"]})
    sts_validation_pooling: str = field(
        default="", metadata={"help": STS_VALIDATION_HELP["sts_validation_pooling"]}
    )
    sts_validation_batch_size: int = field(
        default=128, metadata={"help": STS_VALIDATION_HELP["sts_validation_batch_size"]}
    )


def validate_config(cfg) -> list:
    """Check the augmentation options; returns the composition names (errors name the option)."""
    if cfg.sample_break_mode != "eos":
        raise ClearConfigError(
            f"--sample-break-mode must be 'eos' for --task clear (one sentence per sample), "
            f"got '{cfg.sample_break_mode}'"
        )
    if cfg.tokens_per_sample < 3:
        raise ClearConfigError(f"--tokens-per-sample must be >= 3, got {cfg.tokens_per_sample}")
    if cfg.no_mlm and cfg.mlm_only:
        raise ClearConfigError("--no-mlm with --mlm-only leaves no loss to train")
    if cfg.double_mlm and cfg.no_mlm:
        raise ClearConfigError("--double-mlm adds a second masking; it cannot go with --no-mlm")
    for name in ("mask_prob", "leave_unmasked_prob", "random_token_prob"):
        value = getattr(cfg, name)
        if not 0.0 <= value <= 1.0:
            raise ClearConfigError(f"--{name.replace('_', '-')} must be in [0, 1], got {value}")
    # fairseq's MaskTokensDataset asserts these (a bare AssertionError otherwise)
    if not cfg.no_mlm and not 0.0 < cfg.mask_prob < 1.0:
        raise ClearConfigError(
            f"--mask-prob must be strictly between 0 and 1 (paper: 0.15), got {cfg.mask_prob}; "
            "to train without masked-LM pass --no-mlm"
        )
    if cfg.leave_unmasked_prob + cfg.random_token_prob > 1.0:
        raise ClearConfigError(
            f"--leave-unmasked-prob + --random-token-prob must be at most 1 (paper: 0.1 + 0.1), got "
            f"{cfg.leave_unmasked_prob} + {cfg.random_token_prob}"
        )
    if cfg.batch_composition not in BATCH_COMPOSITIONS:
        raise ClearConfigError(
            f"--batch-composition must be one of {', '.join(BATCH_COMPOSITIONS)}, got '{cfg.batch_composition}'"
        )
    params = augmentation_params(cfg)
    params.validate()
    if cfg.augmentation_mix:
        compositions = [c for c, _ in aug.parse_mixture(cfg.augmentation_mix)]
        names = sorted({n for c in compositions for n in aug.parse_augmentations(c)})
    else:
        names = aug.parse_augmentations(cfg.augmentations)
    if aug.SUBS in names:
        if not cfg.synonym_table:
            raise ClearConfigError(
                "--augmentations uses 'subs' but no --synonym-table was given "
                "(a JSON word -> [synonyms]; see clear-synonyms)"
            )
        if not os.path.isfile(cfg.synonym_table) or not os.access(cfg.synonym_table, os.R_OK):
            raise ClearConfigError(f"--synonym-table: cannot read file '{cfg.synonym_table}'")
    return names


def augmentation_params(cfg) -> aug.AugmentationParams:
    return aug.AugmentationParams(
        del_word_rate=cfg.del_word_rate,
        del_span_count=cfg.del_span_count,
        del_span_ratio=cfg.del_span_ratio,
        reorder_pairs=cfg.reorder_pairs,
        reorder_span_ratio=cfg.reorder_span_ratio,
        subs_rate=cfg.subs_rate,
    )


def data_paths(data: str):
    """fairseq's ':'-separated data shards, except that an existing directory is one path ('run:1/data')."""
    if data and os.path.isdir(data):
        return [data]
    return utils.split_paths(data)


def load_dictionary(data: str) -> Dictionary:
    paths = data_paths(data)
    if not paths:
        raise ClearConfigError("no data directory given")
    path = os.path.join(paths[0], "dict.txt")
    if not os.path.isfile(path):
        raise ClearConfigError(
            f"data directory '{paths[0]}' has no dict.txt: binarize it with "
            "fairseq-preprocess --only-source (see preprocess/prepare.sh)"
        )
    dictionary = Dictionary.load(path)
    dictionary.path = path  # named in size-mismatch errors
    return dictionary


@register_task("clear", dataclass=ClearConfig)
class ClearTask(StsValidationMixin, MaskedLMTask):
    """MLM on each sentence plus two augmented views of it for NT-Xent."""

    cfg: ClearConfig

    def __init__(self, cfg: ClearConfig, dictionary=None):
        self.augmentation_names = validate_config(cfg)
        super().__init__(cfg, dictionary)  # adds <mask>
        # [DEL] only where a deletion writes it: a stock or imported encoder then needs no new row
        self.del_idx = self.dictionary.add_symbol(DEL_SYMBOL) if self.uses_del_symbol() else None
        self._augment = None
        self.init_sts_validation(cfg)  # --sts-validation (StsValidationMixin)

    @property
    def is_contrastive(self):
        return not self.cfg.mlm_only

    def uses_del_symbol(self) -> bool:
        """Whether an augmentation writes [DEL] (del-word, del-span)."""
        if self.cfg.mlm_only:
            return False
        names = set(self.augmentation_names)
        if self.cfg.augmentation_mix:
            names |= {n for c, _ in aug.parse_mixture(self.cfg.augmentation_mix) for n in aug.parse_augmentations(c)}
        return bool(names & set(aug.DELETIONS))

    def batch_sizes_for_order(self, sizes):
        """``sizes`` when batches are composed by length, else None (random batches)."""
        composition = self.cfg.batch_composition
        if composition == "auto":
            composition = "length" if self.paper_mode() == "clear" else "random"
        if not getattr(self, "_logged_composition", False):
            self._logged_composition = True
            logger.info("batch composition: %s (%s)", composition,
                        "--batch-composition" if self.cfg.batch_composition != "auto" else "the paper's")
        return sizes if composition == "length" else None

    def paper_mode(self, model_args=None) -> str:
        """Whose published values fill unset options: SimCSE-unsup for dropout-only views, else CLEAR."""
        if not self.cfg.augmentation_mix and set(self.augmentation_names) <= set(aug.IDENTITY):
            return "simcse"
        return "clear"

    @classmethod
    def setup_task(cls, cfg: ClearConfig, **kwargs):
        dictionary = load_dictionary(cfg.data)
        logger.info("dictionary: %d types", len(dictionary))
        return cls(cfg, dictionary)

    @classmethod
    def load_dict(cls, cfg):
        return load_dictionary(cfg.data)

    # ---- augmentation -----------------------------------------------------------
    def data_tokenizer(self, option: str = "subs"):
        """The tokenizer that made the data: --sentencepiece-model, else the data directory's own
        (clear_tokenizer.json, sentencepiece.model, encoder.json + vocab.bpe, or vocab.txt)."""
        from .. import vocabulary

        try:
            return vocabulary.find(data_paths(self.cfg.data)[0], option, self.cfg.sentencepiece_model)
        except vocabulary.TokenizerError as e:
            raise ClearConfigError(
                f"{e} (it needs the tokenizer that made the data: pass --sentencepiece-model or "
                "prepare the data with clear-prepare)") from None

    def build_augmentation(self) -> aug.Augmentation:
        """AUG(·, seed) of the paper, built once (the synonym index takes a few seconds)."""
        if self._augment is None:
            index = None
            if aug.SUBS in self.augmentation_names:
                from ..synonyms import load_synonym_index

                index = load_synonym_index(self.cfg.synonym_table, self.dictionary, self.data_tokenizer())
                self.synonym_index = index
            params = augmentation_params(self.cfg)
            if self.cfg.augmentation_mix:
                self._augment = aug.build_mixture(
                    aug.parse_mixture(self.cfg.augmentation_mix), params, self.del_idx, index
                )
            else:
                self._augment = aug.build_augmentation(
                    self.augmentation_names, params, self.del_idx, index
                )
        return self._augment

    def log_synonym_coverage(self, sentences, sample_size: int = 10000):
        """Log the share of words that have a synonym (paper: ~40% of tokens), on a sample."""
        self.build_augmentation()
        index = getattr(self, "synonym_index", None)
        if index is None or len(sentences) == 0:
            return None
        from ..synonyms import synonym_coverage

        picks = np.linspace(0, len(sentences) - 1, min(sample_size, len(sentences))).astype(int)
        covered, total = synonym_coverage(index, (sentences[int(i)][1:-1].numpy() for i in picks))
        share = covered / max(total, 1)
        logger.info(
            "subs: %.1f%% of the words in %d sampled sentences have a synonym in %s "
            "(the paper reports about 40%% of tokens)",
            100 * share, len(picks), self.cfg.synonym_table,
        )
        return share

    def log_augmentation_shares(self, sentences, sample_size: int = 500):
        """Log the measured share of changed tokens of each augmentation (and the composition)."""
        if len(sentences) == 0 or self.cfg.augmentation_mix:
            return {}
        params = augmentation_params(self.cfg)
        index = getattr(self, "synonym_index", None)
        picks = np.linspace(0, len(sentences) - 1, min(sample_size, len(sentences))).astype(int)
        bodies = [sentences[int(i)][1:-1].numpy() for i in picks]
        names = list(dict.fromkeys(self.augmentation_names))
        shares = {}
        for label, parts in [(n, [n]) for n in names] + ([(",".join(self.augmentation_names), self.augmentation_names)] if len(names) > 1 else []):
            fn = aug.build_augmentation(parts, params, self.del_idx, index)
            rng = np.random.default_rng(self.cfg.seed)
            shares[label] = float(np.mean([aug.changed_share(b, fn(b, rng)) for b in bodies]))
        logger.info(
            "augmentation: measured share of changed tokens on %d sentences: %s",
            len(bodies), ", ".join(f"{k} {100 * v:.1f}%" for k, v in shares.items()),
        )
        return shares

    # ---- data ---------------------------------------------------------------------
    def load_sentences(self, split, epoch=1, combine=False) -> SentenceDataset:
        paths = data_paths(self.cfg.data)
        data_path = paths[(epoch - 1) % len(paths)]
        split_path = os.path.join(data_path, split)
        lines = load_checked(split_path, self.source_dictionary, combine=combine)
        if lines is None:
            raise FileNotFoundError(
                f"split '{split}' not found: no {split_path}.bin/.idx (run fairseq-preprocess "
                f"with --{split}pref, or pass --valid-subset)"
            )
        return SentenceDataset(
            lines,
            max_body_len=self.cfg.tokens_per_sample - 2,
            bos=self.source_dictionary.bos(),
            eos=self.source_dictionary.eos(),
            name=f"{split} ({split_path})",
        )

    def mask(self, sentences, seed):
        return MaskTokensDataset.apply_mask(
            sentences,
            self.source_dictionary,
            pad_idx=self.source_dictionary.pad(),
            mask_idx=self.mask_idx,
            seed=seed,
            mask_prob=self.cfg.mask_prob,
            leave_unmasked_prob=self.cfg.leave_unmasked_prob,
            random_token_prob=self.cfg.random_token_prob,
            freq_weighted_replacement=self.cfg.freq_weighted_replacement,
        )

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        sentences = self.load_sentences(split, epoch, combine)
        pad = self.source_dictionary.pad()
        defn = {
            "id": IdDataset(),
            "nsentences": NumSamplesDataset(),
            "ntokens": NumelDataset(sentences, reduce=True),
        }
        if not self.cfg.no_mlm:
            src, tgt = self.mask(sentences, self.cfg.seed)
            defn["net_input"] = {
                "src_tokens": RightPadDataset(src, pad_idx=pad),
                "src_lengths": NumelDataset(src, reduce=False),
            }
            defn["target"] = RightPadDataset(tgt, pad_idx=pad)
        if self.cfg.double_mlm:
            # a different seed gives an independent second masking of each sentence
            src2, tgt2 = self.mask(sentences, self.cfg.seed + 7919)
            defn["net_input2"] = {
                "src_tokens": RightPadDataset(src2, pad_idx=pad),
                "src_lengths": NumelDataset(src2, reduce=False),
            }
            defn["target2"] = RightPadDataset(tgt2, pad_idx=pad)
        if not self.cfg.mlm_only:
            if split == getattr(self.cfg, "train_subset", "train"):
                self.log_synonym_coverage(sentences)
                self.log_augmentation_shares(sentences)
            defn["contrastive"] = ContrastiveViewsDataset(
                sentences,
                self.build_augmentation(),
                seed=self.cfg.seed,
                max_body_len=self.cfg.tokens_per_sample - 2,
                bos=self.source_dictionary.bos(),
                eos=self.source_dictionary.eos(),
                pad=pad,
            )
        dataset = NestedDictionaryDataset(defn, sizes=[sentences.sizes])
        # the batch is the set of negatives: regroup it every epoch (fairseq's
        # SortDataset would fix which sentences meet for the whole run)
        self.datasets[split] = EpochShuffledDataset(
            dataset, self.cfg.seed, sizes=self.batch_sizes_for_order(sentences.sizes)
        )

    def get_batch_iterator(self, dataset, *args, **kwargs):
        with keeping_last_batch(dataset):  # fairseq drops it: see fairseq_fixes/keep_last_batch.py
            itr = super().get_batch_iterator(dataset, *args, **kwargs)
        # --num-workers > 0: a worker holds the copy of the dataset made when it
        # started, so fairseq's reused, persistent DataLoader would keep epoch 1's
        # views and masks for ever, while a resumed run starts workers at the
        # right epoch and diverges. A fresh loader per epoch sees set_epoch().
        itr.reuse_dataloader = False
        itr.persistent_workers = False
        return itr  # its prefetch thread is stopped at exit: fairseq_fixes/prefetch_threads.py

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        if ignore_grad and isinstance(sample.get("contrastive"), dict):
            # fairseq's dummy batch (this rank ran out of data): see ClearCriterion
            sample = dict(sample, contrastive=dict(sample["contrastive"], is_dummy=True))
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def max_positions(self):
        return self.cfg.tokens_per_sample
