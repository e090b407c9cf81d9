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
from fairseq.data import (
    AppendTokenDataset,
    IdDataset,
    NestedDictionaryDataset,
    NumelDataset,
    NumSamplesDataset,
    RightPadDataset,
    TokenBlockDataset,
)
from fairseq.tasks import register_task

from .. import augmentations as aug
from ..data import ContrastiveViewsDataset, EpochShuffledDataset, SentenceDataset
from ..vocabulary import DEL_SYMBOL  # noqa: F401  (re-exported: tasks.clear.DEL_SYMBOL)
from .contrastive import (  # noqa: F401  (data_paths, load_dictionary: re-exported)
    ContrastiveConfig,
    ContrastiveTask,
    TaskConfigError,
    data_paths,
    load_dictionary,
)

logger = logging.getLogger(__name__)

#: 'eos' = sentence samples; the others are fairseq's TokenBlockDataset modes (as masked_lm)
SAMPLE_BREAK_MODES = ("eos", "complete", "complete_doc", "none")


@dataclass
class ClearViewsConfig(ContrastiveConfig):
    """The sample and the augmentation composition of ``--task clear`` (the first options of
    :class:`ClearConfig`, which lists the rates after them)."""

    sample_break_mode: str = field(
        default="eos",
        metadata={
            "help": "the unit of a sample: 'eos' = one sentence (line) per sample, for sentence "
            "embeddings; 'complete', 'complete_doc', 'none' = RoBERTa's blocks of up to "
            "--tokens-per-sample tokens as fairseq's masked_lm makes them (the paper's recipe, §4.1: "
            "sequences of up to 512 tokens, RoBERTa's 'complete'); MLM and the augmentations then "
            "apply to the whole block (its spans of 5 percent are about 25 tokens at 512)"
        },
    )
    augmentations: str = field(
        default="del-word",
        metadata={
            "help": "augmentation composition AUG for both views, applied in the order "
            "written, e.g. 'del-word', 'subs,del-span', 'del-span,reorder' (Table 1). "
            "Names: del-word, del-span, reorder, subs, word-rep (ESimCSE), and none/dropout (identity: "
            "dropout is the only noise, SimCSE)"
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


@dataclass
class ClearConfig(aug.AugmentationParams, ClearViewsConfig):
    """``--task clear``'s options: :class:`ClearViewsConfig`'s, the augmentations' rates
    (declared once, in :class:`~fairseq_clear.augmentations.AugmentationParams`), then these."""

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
    double_mlm: bool = field(
        default=False,
        metadata={
            "help": "Double-MLM baseline (§5.1): add a second, independent masking of "
            "each sentence with its own MLM loss"
        },
    )


def validate_config(cfg) -> list:
    """Check the augmentation options; returns the composition names (errors name the option)."""
    if cfg.sample_break_mode not in SAMPLE_BREAK_MODES:
        raise TaskConfigError(
            f"--sample-break-mode must be one of {', '.join(SAMPLE_BREAK_MODES)} for --task clear "
            f"('eos': one sentence per sample; the others: fairseq's blocks), got '{cfg.sample_break_mode}'"
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
            raise TaskConfigError(
                "--augmentations uses 'subs' but no --synonym-table was given "
                "(a JSON word -> [synonyms]; see clear-synonyms)"
            )
        if not os.path.isfile(cfg.synonym_table) or not os.access(cfg.synonym_table, os.R_OK):
            raise TaskConfigError(f"--synonym-table: cannot read file '{cfg.synonym_table}'")
    return names


def augmentation_params(cfg) -> aug.AugmentationParams:
    return aug.AugmentationParams.from_config(cfg)


def token_blocks(lines, mode: str, tokens_per_sample: int, dictionary):
    """RoBERTa's samples: fairseq's TokenBlockDataset over the split's lines (each ending in
    ``</s>``, empty lines as document separators), as items ``block </s>`` for SentenceDataset,
    which adds ``<s>``. 'complete' blocks end with their last line's ``</s>``; a 'none' block may
    end mid-sentence, so it gets one appended."""
    pad, eos = dictionary.pad(), dictionary.eos()
    if mode == "none":
        blocks = TokenBlockDataset(lines, lines.sizes, tokens_per_sample - 2, pad, eos, break_mode="none")
        return AppendTokenDataset(blocks, eos)
    return TokenBlockDataset(lines, lines.sizes, tokens_per_sample - 1, pad, eos, break_mode=mode,
                             document_sep_len=1)


@register_task("clear", dataclass=ClearConfig)
class ClearTask(ContrastiveTask):
    """MLM on each sentence plus two augmented views of it for NT-Xent."""

    cfg: ClearConfig
    name = "clear"
    config_class = ClearConfig
    inference_overrides = {"augmentations": "none", "augmentation_mix": "", "synonym_table": ""}

    @classmethod
    def model_card_training(cls, task_cfg, model_args) -> str:
        """How a checkpoint of this task was trained, in words (the exported model card);
        ``task_cfg``: its task options as saved (``get(key, default)``)."""
        augmentations = task_cfg.get("augmentation_mix") or task_cfg.get("augmentations", "?")
        if task_cfg.get("mlm_only"):
            return "masked language modelling only (CLEAR's MLM baseline)"
        if augmentations in ("none", "dropout"):
            return "SimCSE unsupervised (Gao et al. 2021): dropout as the only augmentation"
        no_mlm = task_cfg.get("mlm") == "off" or task_cfg.get("no_mlm")  # no_mlm: older checkpoints
        return (f"CLEAR (Wu et al. 2020): masked LM + NT-Xent between two views made with "
                f"`{augmentations}`" + (" (no MLM)" if no_mlm else ""))

    def __init__(self, cfg: ClearConfig, dictionary=None):
        self.augmentation_names = validate_config(cfg)
        super().__init__(cfg, dictionary)  # adds <mask>; resolves --mlm
        if cfg.double_mlm and not self.uses_mlm:
            raise TaskConfigError("--double-mlm adds a second masking; it cannot go with --mlm off")
        # [DEL] only where a deletion writes it: a stock or imported encoder then needs no new row
        self.del_idx = self.dictionary.add_symbol(DEL_SYMBOL) if self.uses_del_symbol() else None
        self._augment = None

    def uses_del_symbol(self) -> bool:
        """Whether an augmentation writes [DEL] (del-word, del-span)."""
        if self.cfg.mlm_only:
            return False
        names = set(self.augmentation_names)
        if self.cfg.augmentation_mix:
            names |= {n for c, _ in aug.parse_mixture(self.cfg.augmentation_mix) for n in aug.parse_augmentations(c)}
        return bool(names & set(aug.DELETIONS))

    def paper_mode(self, model_cfg=None) -> str:
        """Whose published values fill unset options: SimCSE-unsup for dropout-only views, else CLEAR."""
        if not self.cfg.augmentation_mix and set(self.augmentation_names) <= set(aug.IDENTITY):
            return "simcse"
        return "clear"

    # ---- augmentation -----------------------------------------------------------
    @property
    def tokenizer_file(self) -> str:
        return self.cfg.sentencepiece_model

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

    def view_augmentations(self):
        """The two views' augmentations: :meth:`build_augmentation`'s for both, or with word-rep and
        --word-rep-views positive (ESimCSE), the same composition without word-rep for the anchor."""
        second = self.build_augmentation()
        if aug.WORD_REP not in self.augmentation_names or str(self.cfg.word_rep_views) != "positive":
            return second
        params, index = augmentation_params(self.cfg), getattr(self, "synonym_index", None)
        if self.cfg.augmentation_mix:
            mixture = [(",".join(aug.without_word_rep(aug.parse_augmentations(c))), p)
                       for c, p in aug.parse_mixture(self.cfg.augmentation_mix)]
            return aug.build_mixture(mixture, params, self.del_idx, index), second
        return aug.build_augmentation(aug.without_word_rep(self.augmentation_names), params, self.del_idx,
                                      index), second

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
        shares, rows_changed = {}, {}
        for label, parts in [(n, [n]) for n in names] + ([(",".join(self.augmentation_names), self.augmentation_names)] if len(names) > 1 else []):
            fn = aug.build_augmentation(parts, params, self.del_idx, index)
            rng = np.random.default_rng(self.cfg.seed)
            per_row = [aug.changed_share(b, fn(b, rng)) for b in bodies]
            shares[label], rows_changed[label] = float(np.mean(per_row)), sum(1 for v in per_row if v > 0)
        logger.info(
            "augmentation: measured share of changed tokens on %d sentences: %s",
            len(bodies), ", ".join(f"{k} {100 * v:.1f}%" for k, v in shares.items()),
        )
        for name in names:
            if name != "none" and rows_changed[name] < 0.05 * len(bodies):
                # e.g. word-rep on rows already at --tokens-per-sample (block modes fill them): no room to repeat
                room = (f"; --sample-break-mode {self.cfg.sample_break_mode} fills rows to --tokens-per-sample, "
                        "which leaves word-rep no room to repeat into (use --sample-break-mode eos)"
                        if name == "word-rep" and self.cfg.sample_break_mode != "eos" else "")
                logger.warning("augmentation %s changed %d of the %d sampled rows: almost all its views are the "
                               "rows themselves%s", name, rows_changed[name], len(bodies), room)
        return shares

    # ---- data ---------------------------------------------------------------------
    def load_sentences(self, split, epoch=1, combine=False) -> SentenceDataset:
        split_path = self.split_path(split, epoch)
        lines = self.load_lines(split_path, combine)
        if self.cfg.sample_break_mode != "eos":
            lines = token_blocks(lines, self.cfg.sample_break_mode, self.cfg.tokens_per_sample,
                                 self.source_dictionary)
        return SentenceDataset(
            lines,
            max_body_len=self.cfg.tokens_per_sample - 2,
            bos=self.source_dictionary.bos(),
            eos=self.source_dictionary.eos(),
            name=f"{split} ({split_path})",
        )

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        sentences = self.load_sentences(split, epoch, combine)
        pad = self.source_dictionary.pad()
        defn = {
            "id": IdDataset(),
            "nsentences": NumSamplesDataset(),
            "ntokens": NumelDataset(sentences, reduce=True),
        }
        if self.uses_mlm:
            src, tgt = self.mask(sentences)
            defn["net_input"] = {
                "src_tokens": RightPadDataset(src, pad_idx=pad),
                "src_lengths": NumelDataset(src, reduce=False),
            }
            defn["target"] = RightPadDataset(tgt, pad_idx=pad)
        if self.cfg.double_mlm:
            # a different seed gives an independent second masking of each sentence
            src2, tgt2 = self.mask(sentences, slot=1)
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
                self.view_augmentations(),
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
