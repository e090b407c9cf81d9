"""Task ``declutr``: DeCLUTR's span-based contrastive objective (Giorgi et al. 2021, §3).

Each sample is one *document* of a binarized split (a run of lines between
empty lines, docs/design.md). From it the task samples A anchor spans and P
positive spans per anchor (:mod:`fairseq_clear.span_sampling`) and yields

* ``net_input``/``target``: RoBERTa MLM on the A anchors (§3.2), masked by
  fairseq's ``MaskTokensDataset`` as in ``--task clear``;
* ``contrastive``: the anchors, then their positives anchor-major, so that
  ``--criterion clear`` compares each anchor's embedding with the *mean* of
  its P positive embeddings under NT-Xent (eq. 2), all other spans of the
  batch (including those of the same document) being negatives.

L = L_contrastive + L_MLM (eq. 3) is ``--criterion clear --cl-weight 1``.
The paper continues pre-training RoBERTa: start from a checkpoint with
``--finetune-from-model`` (or ``--restore-file`` and the ``--reset-*`` flags);
heads of another configuration in that checkpoint are re-initialised (logged).
Use ``--sentence-pooling mean --projection-layers 0`` and
``--temperature 0.05`` for the paper's setting (examples/declutr).
"""

import logging
from dataclasses import dataclass, field

from fairseq.data import IdDataset, NestedDictionaryDataset, NumSamplesDataset
from fairseq.tasks import register_task

from ..data import (
    ContrastiveRowsDataset,
    DocumentDataset,
    DocumentSpansDataset,
    EpochShuffledDataset,
    ListItemDataset,
    RowTokensDataset,
    StackedRowsDataset,
)
from ..span_sampling import SpanSamplingParams, parse_beta
from .contrastive import NOT_HONOURED, ContrastiveConfig, ContrastiveTask, TaskConfigError

logger = logging.getLogger(__name__)


@dataclass
class DeclutrConfig(ContrastiveConfig):
    num_anchors: int = field(
        default=2, metadata={"help": "A: anchor spans sampled per document (paper: 2)"}
    )
    num_positives: int = field(
        default=2,
        metadata={
            "help": "P: positive spans per anchor; the anchor is compared with their mean "
            "embedding (paper: 2)"
        },
    )
    min_span_length: int = field(
        default=32, metadata={"help": "ℓmin: shortest span, in corpus tokens (paper: 32)"}
    )
    max_span_length: int = field(
        default=512,
        metadata={
            "help": "ℓmax: longest span, in corpus tokens (paper: 512); also the least gap "
            "between two anchors of one document. Spans longer than --tokens-per-sample − 2 "
            "are cut to it"
        },
    )
    min_document_tokens: int = field(
        default=0,
        metadata={
            "help": "documents shorter than this are skipped and counted; 0 = 2·A·ℓmax "
            "(DeCLUTR's requirement; the paper's corpus keeps documents of >= 2048 tokens)"
        },
    )
    anchor_length_beta: str = field(
        default="4,2",
        metadata={"help": "Beta(α,β) of anchor lengths, skewed to long spans (paper: 4,2)"},
    )
    positive_length_beta: str = field(
        default="2,4",
        metadata={"help": "Beta(α,β) of positive lengths, skewed to short spans (paper: 2,4)"},
    )
    contrast_clean_anchors: bool = field(
        default=False,
        metadata={
            "help": "embed the unmasked anchors for the contrastive loss; by default the "
            "anchor embedding comes from the masked anchor that the MLM loss sees, as in "
            "DeCLUTR's code (one pass there)"
        },
    )


def span_params(cfg) -> SpanSamplingParams:
    params = SpanSamplingParams(
        num_anchors=cfg.num_anchors,
        num_positives=cfg.num_positives,
        min_length=cfg.min_span_length,
        max_length=cfg.max_span_length,
        anchor_beta=parse_beta(cfg.anchor_length_beta, "anchor-length-beta"),
        positive_beta=parse_beta(cfg.positive_length_beta, "positive-length-beta"),
        min_document_tokens=cfg.min_document_tokens,
    )
    params.validate()
    return params


@register_task("declutr", dataclass=DeclutrConfig)
class DeclutrTask(ContrastiveTask):
    """MLM on A anchor spans per document plus NT-Xent of each anchor against its P positives."""

    cfg: DeclutrConfig
    name = "declutr"
    config_class = DeclutrConfig
    #: a sample is a document, cut into spans by DeCLUTR's sampler, not by fairseq's break modes
    not_honoured = NOT_HONOURED + ("sample_break_mode",)
    paper = "declutr"

    @classmethod
    def model_card_training(cls, task_cfg, model_args) -> str:
        """How a checkpoint of this task was trained, in words (the exported model card);
        ``task_cfg``: its task options as saved (``get(key, default)``)."""
        return (f"DeCLUTR (Giorgi et al. 2021): {task_cfg.get('num_anchors')} anchor span(s) and "
                f"{task_cfg.get('num_positives')} positive span(s) per document, masked LM + contrastive")

    def __init__(self, cfg: DeclutrConfig, dictionary=None):
        self.span_params = span_params(cfg)  # fails at start-up, naming the option
        super().__init__(cfg, dictionary)
        longest = cfg.tokens_per_sample - 2
        if cfg.max_span_length > longest:
            logger.warning(
                "--max-span-length %d is longer than --tokens-per-sample %d allows with <s> "
                "and </s>: spans are cut to %d tokens (DeCLUTR's tokenizer likewise cuts to "
                "the model's 512 positions)", cfg.max_span_length, cfg.tokens_per_sample, longest,
            )

    @property
    def contrastive_views_masked(self) -> bool:
        """Whether the anchors the contrastive loss embeds are the MLM's masked ones (DeCLUTR's code:
        one pass), which hold <mask> and MLM's random replacements in place of their tokens."""
        return self.uses_mlm and not self.cfg.contrast_clean_anchors and not self.cfg.mlm_only

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        args = getattr(model, "args", None)
        if args is not None and (
            getattr(args, "sentence_pooling", "mean") != "mean"
            or getattr(args, "projection_layers", 0) != 0
        ):
            logger.info(
                "DeCLUTR embeds spans by mean pooling without a projection head "
                "(--sentence-pooling mean --projection-layers 0); this model uses pooling "
                "'%s' and %s projection layers", args.sentence_pooling, args.projection_layers,
            )
        return model

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        split_path = self.split_path(split, epoch)
        lines = self.load_lines(split_path, combine)
        params = self.span_params
        documents = DocumentDataset(lines, params.required_tokens, name=f"{split} ({split_path})")
        if len(documents) == 0:
            raise TaskConfigError(
                f"split '{split}' ({split_path}) has no document of at least "
                f"{params.required_tokens} tokens (--min-document-tokens, default "
                f"2·A·ℓmax = 2·{params.num_anchors}·{params.max_length}); documents are runs "
                "of lines between empty lines. Lower --num-anchors/--max-span-length, or "
                "pass --disable-validation for a validation split without long documents"
            )
        dictionary = self.source_dictionary
        pad = dictionary.pad()
        spans = DocumentSpansDataset(
            documents,
            params,
            seed=self.cfg.seed,
            max_body_len=self.cfg.tokens_per_sample - 2,
            bos=dictionary.bos(),
            eos=dictionary.eos(),
        )
        a, p = params.num_anchors, params.num_positives
        anchors = [ListItemDataset(spans, k) for k in range(a)]
        positives = [ListItemDataset(spans, a + k) for k in range(a * p)]
        defn = {
            "id": IdDataset(),
            "nsentences": NumSamplesDataset(),
            "ntokens": RowTokensDataset(anchors + positives),
        }
        contrast_anchors = anchors
        if self.uses_mlm:
            # MLM on the anchors only (§3.2); each anchor slot gets its own mask seed
            masked = [self.mask(d, slot=k) for k, d in enumerate(anchors)]
            defn["net_input"] = {"src_tokens": StackedRowsDataset([s for s, _ in masked], pad)}
            defn["target"] = StackedRowsDataset([t for _, t in masked], pad)
            if not self.cfg.contrast_clean_anchors:
                contrast_anchors = [s for s, _ in masked]
        if not self.cfg.mlm_only:
            defn["contrastive"] = ContrastiveRowsDataset(contrast_anchors, positives, pad=pad)
        dataset = NestedDictionaryDataset(defn, sizes=[spans.sizes])
        # fresh random batches every epoch: the batch is the set of negatives
        self.datasets[split] = EpochShuffledDataset(
            dataset, seed=self.cfg.seed, sizes=self.batch_sizes_for_order(spans.sizes)
        )
