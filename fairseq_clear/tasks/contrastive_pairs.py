"""Task ``contrastive_pairs``: supervised contrastive training on labelled sentence pairs.

Each sample is a row (sentence, positive[, hard negative]) of a data directory
made by ``clear-prepare-pairs``::

    DATA/dict.txt, DATA/sentencepiece.model
    DATA/sent0/{dict.txt, train.bin, train.idx, valid.*}   anchors
    DATA/sent1/...                                        positives
    DATA/hard_neg/...                                     hard negatives (optional)

(the columns of SimCSE's ``nli_for_simcse.csv``; like fairseq's
``sentence_prediction`` input0/input1, all with the same dict.txt). The
``contrastive`` part of a batch holds the N anchors, the N positives and, if
used, the N hard negatives, for ``--criterion clear``:

* SimCSE supervised (Gao et al. 2021; seed 004 §4.1): NLI entailment pairs with
  the contradiction as hard negative, ``--loss-form simcse`` (the hard negatives
  join every anchor's candidates; ``--hard-negative-weight`` is SimCSE's
  log-weight), τ = 0.05; Quora duplicates are pairs without hard negatives.
* CLSR (seed 003): STS-B pairs scoring > 4 or NLI entailment pairs, NT-Xent
  (``--loss-form nt-xent``) over a frozen encoder with the MLP e and linear h
  (``--freeze-encoder --sentence-mlp-hidden-dim ... --projection-layers 1``), τ = 0.1.

MLM is off by default, as in both papers (``--mlm`` adds SimCSE's auxiliary MLM on every sentence).
"""

import logging
import os
from dataclasses import dataclass, field

import numpy as np
from fairseq.data import (
    Dictionary,
    IdDataset,
    NestedDictionaryDataset,
    NumSamplesDataset,
)
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task

from ..data import (
    ContrastiveRowsDataset,
    DuplicateFreeBatchesDataset,
    EpochShuffledDataset,
    RowTokensDataset,
    SentenceDataset,
    StackedRowsDataset,
)
from ..data.binarized_checks import load_dictionary as load_dictionary_file
from .contrastive import NOT_HONOURED, ContrastiveConfig, ContrastiveTask, TaskConfigError, data_paths

logger = logging.getLogger(__name__)

HARD_NEGATIVE_CHOICES = ChoiceEnum(["auto", "on", "off"])


@dataclass
class ContrastivePairsConfig(ContrastiveConfig):
    anchor_column: str = field(
        default="sent0", metadata={"help": "subdirectory of DATA holding the anchor sentences"}
    )
    positive_column: str = field(
        default="sent1", metadata={"help": "subdirectory of DATA holding each anchor's positive"}
    )
    hard_negative_column: str = field(
        default="hard_neg",
        metadata={"help": "subdirectory of DATA holding each anchor's hard negative"},
    )
    hard_negatives: HARD_NEGATIVE_CHOICES = field(
        default="auto",
        metadata={
            "help": "use the hard-negative column (SimCSE supervised: NLI contradictions; "
            "needs --loss-form simcse): auto = when DATA has it, on = require it, off = never"
        },
    )
    negative_pairs: bool = field(
        default=False,
        metadata={
            "help": "seed 004 §4.1: rows labelled 0 in DATA/label/SPLIT.label (clear-prepare-pairs "
            "--negative-pairs: Quora / MRPC non-paraphrases) are negative pairs whose contrastive loss "
            "is maximised (their term enters with sign -1); rows labelled 1 are positives as usual"
        },
    )
    batch_without_duplicates: bool = field(
        default=False,
        metadata={
            "help": "no text twice in a batch (sentence-transformers' NoDuplicatesBatchSampler): a row "
            "sharing a sentence (any column) with the batch being filled waits for a later batch; counted "
            "in the log. Across ranks and --update-freq micro-batches duplicates can remain: "
            "--mask-duplicates masks those"
        },
    )

def _column_dir(cfg, column: str) -> str:
    return os.path.join(data_paths(cfg.data)[0], column)


@register_task("contrastive_pairs", dataclass=ContrastivePairsConfig)
class ContrastivePairsTask(ContrastiveTask):
    """NT-Xent or SimCSE's loss over labelled (sentence, positive[, hard negative]) rows."""

    cfg: ContrastivePairsConfig
    name = "contrastive_pairs"
    config_class = ContrastivePairsConfig
    continued_modes = {"simcse": "simcse-sup"}
    #: a sample is a row of the pair columns, not a fairseq break mode
    not_honoured = NOT_HONOURED + ("sample_break_mode",)

    @classmethod
    def model_card_training(cls, task_cfg, model_args) -> str:
        """How a checkpoint of this task was trained, in words (the exported model card);
        ``task_cfg``: its task options as saved (``get(key, default)``)."""
        if getattr(model_args, "freeze_encoder", False):
            return "CLSR: a contrastive MLP over the frozen pre-trained encoder, on labelled positive pairs"
        return "SimCSE supervised (Gao et al. 2021): labelled pairs" + (
            " with hard negatives" if task_cfg.get("hard_negatives", "auto") != "off" else "")

    def __init__(self, cfg: ContrastivePairsConfig, dictionary=None):
        if cfg.mlm_only and cfg.mlm != "on":
            raise TaskConfigError(
                "--mlm-only on --task contrastive_pairs needs --mlm on (MLM is off by default here)"
            )
        self.columns = [cfg.anchor_column, cfg.positive_column]
        self.uses_hard_negatives = self._hard_negatives(cfg)
        if cfg.negative_pairs and self.uses_hard_negatives:
            raise TaskConfigError("--negative-pairs takes pairs without hard negatives: pass --hard-negatives off "
                                  "(or prepare the data with clear-prepare-pairs --negative-pairs)")
        if self.uses_hard_negatives:
            self.columns.append(cfg.hard_negative_column)
        super().__init__(cfg, dictionary)
        logger.info(
            "pairs: columns %s (hard negatives: %s)", ", ".join(self.columns),
            "yes" if self.uses_hard_negatives else "no",
        )

    @staticmethod
    def _hard_negatives(cfg) -> bool:
        if cfg.hard_negatives == "off" or cfg.mlm_only:
            return False
        if cfg.hard_negatives == "on":
            return True  # load_dataset fails, naming the directory, if the column is missing
        return os.path.isdir(_column_dir(cfg, cfg.hard_negative_column))

    def paper_mode(self, model_cfg=None) -> str:
        """CLSR over a frozen encoder (--freeze-encoder), SimCSE-supervised otherwise."""
        return "clsr" if model_cfg is not None and getattr(model_cfg, "freeze_encoder", False) else "simcse"

    @classmethod
    def dictionary_for(cls, cfg) -> Dictionary:
        """DATA/dict.txt, or the anchor column's; every column must use the same one."""
        root = data_paths(cfg.data)[0]
        candidates = [os.path.join(root, "dict.txt"), os.path.join(root, cfg.anchor_column, "dict.txt")]
        path = next((p for p in candidates if os.path.isfile(p)), None)
        if path is None:
            raise TaskConfigError(
                f"data directory '{root}' has neither dict.txt nor {cfg.anchor_column}/dict.txt: "
                "build it with clear-prepare-pairs"
            )
        dictionary = load_dictionary_file(path)
        dictionary.path = path
        for column in (cfg.positive_column, cfg.hard_negative_column):
            other = os.path.join(root, column, "dict.txt")
            if os.path.isfile(other) and load_dictionary_file(other).symbols != dictionary.symbols:
                raise TaskConfigError(
                    f"{other} differs from {path}: every column must be binarized with the "
                    "same dict.txt (clear-prepare-pairs does this)"
                )
        return dictionary

    def load_column(self, column: str, split: str, combine=False) -> SentenceDataset:
        split_path = os.path.join(_column_dir(self.cfg, column), split)
        if column == self.cfg.hard_negative_column and not any(
                os.path.exists(split_path + ext) for ext in (".idx", ".bin")):
            raise TaskConfigError(
                f"--hard-negatives {self.cfg.hard_negatives}, but there is no {split_path}.bin/.idx: "
                "build the data with clear-prepare-pairs from rows with hard negatives, or "
                "pass --hard-negatives off"
            )
        lines = self.load_lines(split_path, combine, missing=(
            f"split '{split}' of column '{column}' not found: no {split_path}.bin/.idx "
            "(clear-prepare-pairs --valid adds a validation split; or pass "
            "--disable-validation)"
        ))
        sentences = SentenceDataset(
            lines,
            max_body_len=self.cfg.tokens_per_sample - 2,
            bos=self.source_dictionary.bos(),
            eos=self.source_dictionary.eos(),
            name=f"{split}/{column} ({split_path})",
        )
        if sentences.num_empty:
            # an empty line would shift every later row against the other columns
            raise TaskConfigError(
                f"{split_path} has {sentences.num_empty} empty lines, so its rows no longer "
                "line up with the other columns; rebuild the data with clear-prepare-pairs"
            )
        return sentences

    def pair_signs(self, split: str, rows: int) -> np.ndarray:
        """+1 for a row labelled 1, -1 for a row labelled 0 (DATA/label/SPLIT.label)."""
        path = os.path.join(data_paths(self.cfg.data)[0], "label", f"{split}.label")
        if not os.path.isfile(path):
            raise TaskConfigError(f"--negative-pairs: no {path} (build the data with clear-prepare-pairs --negative-pairs)")
        with open(path, encoding="utf-8") as f:
            labels = [line.strip() for line in f]
        bad = next((i for i, v in enumerate(labels) if v not in ("0", "1")), None)
        if bad is not None:
            raise TaskConfigError(f"{path}:{bad + 1}: label '{labels[bad]}' is not 0 or 1")
        if len(labels) != rows:
            raise TaskConfigError(f"{path}: {len(labels)} labels for {rows} rows; rebuild the data with clear-prepare-pairs")
        signs = np.where(np.asarray(labels) == "1", 1.0, -1.0).astype(np.float32)
        logger.info("%s: %d positive and %d negative pairs (--negative-pairs)", split, int((signs > 0).sum()),
                    int((signs < 0).sum()))
        return signs

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        cols = [self.load_column(c, split, combine) for c in self.columns]
        lengths = {c: len(d) for c, d in zip(self.columns, cols)}
        if len(set(lengths.values())) != 1:
            raise TaskConfigError(
                f"split '{split}': the columns have different numbers of rows {lengths}; "
                "rebuild the data with clear-prepare-pairs"
            )
        pad = self.source_dictionary.pad()
        defn = {
            "id": IdDataset(),
            "nsentences": NumSamplesDataset(),
            "ntokens": RowTokensDataset(cols),
        }
        if self.uses_mlm:
            # SimCSE masks every sentence of a row; each column gets its own mask seed
            masked = [self.mask(d, slot=k) for k, d in enumerate(cols)]
            defn["net_input"] = {"src_tokens": StackedRowsDataset([s for s, _ in masked], pad)}
            defn["target"] = StackedRowsDataset([t for _, t in masked], pad)
        if not self.cfg.mlm_only:
            defn["contrastive"] = ContrastiveRowsDataset(
                [cols[0]], [cols[1]], cols[2:] if self.uses_hard_negatives else None, pad=pad,
                signs=self.pair_signs(split, len(cols[0])) if self.cfg.negative_pairs else None,
            )
        sizes = np.max(np.stack([d.sizes for d in cols]), axis=0)
        dataset = NestedDictionaryDataset(defn, sizes=[sizes])
        # fresh random batches every epoch: the batch is the set of negatives
        shuffled = EpochShuffledDataset(dataset, seed=self.cfg.seed, sizes=self.batch_sizes_for_order(sizes))
        self.datasets[split] = (DuplicateFreeBatchesDataset(shuffled, cols, sizes)
                                if self.cfg.batch_without_duplicates else shuffled)
