"""``--criterion clear``'s options (``ClearCriterionConfig``, each with the paper's value) and
their check at start-up, apart from the loss itself (criterions/clear.py)."""

import importlib.util
import logging
import math
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from omegaconf import II

from ..errors import FairseqClearError
from ..losses import matryoshka  # noqa: F401  (the options of the loss, parsed beside it)

logger = logging.getLogger(__name__)

LOSS_FORMS = ChoiceEnum(["paper", "nt-xent", "simcse"])
GATHER_CHOICES = ChoiceEnum(["auto", "on", "off"])
MARGIN_STRATEGIES = ChoiceEnum(["absolute", "relative"])
HARDNESS_CHOICES = ChoiceEnum(["off", "in_batch_negatives", "hard_negatives", "all_negatives"])
DISTILL_PROJECTIONS = ChoiceEnum(["linear", "none"])


class ClearCriterionError(FairseqClearError, ValueError):
    """A ``--criterion clear`` option that cannot work; the message names it."""


@dataclass
class ClearCriterionConfig(FairseqDataclass):
    cl_weight: float = field(
        default=1.0,
        metadata={"help": "λ in L = L_MLM + λ·L_CL (paper eq. 3: 1); 0 trains MLM only"},
    )
    # NaN, not None, for "not given" (paper_defaults.CRITERION_OPTIONS): fairseq's generation
    # config shares --temperature and cannot take None
    temperature: float = field(
        default=float("nan"),
        metadata={
            "help": "τ of the contrastive loss (default: the task's paper value). CLEAR does not "
            "state it; 0.1 is SimCLR's setting, whose framework CLEAR borrows. DeCLUTR and "
            "SimCSE use 0.05, CLSR 0.1"
        },
    )
    loss_form: LOSS_FORMS = field(
        default="paper",
        metadata={
            "help": "nt-xent: every other view of the batch is a negative, both directions "
            "(CLEAR, DeCLUTR, CLSR); simcse: each anchor against all positives "
            "(and hard negatives), one direction (SimCSE); paper = the task's paper value (default)"
        },
    )
    gather_negatives: GATHER_CHOICES = field(
        default="auto",
        metadata={
            "help": "take negatives from every rank (an all-gather that keeps gradients): "
            "auto = on whenever training is distributed; on = require it; off = local only"
        },
    )
    contrastive_chunk_size: int = field(
        default=0,
        metadata={
            "help": "GradCache: encode the contrastive views in chunks of this many rows without "
            "keeping activations, and re-encode each chunk with its graph in the backward pass, so "
            "the candidate set is not limited by memory (CLEAR's 8,192-sentence batch on one "
            "node); the guide's and the momentum encoder's vectors are computed in the same chunks; 0 = off. "
            "Several ranks need --ddp-backend legacy_ddp (see fairseq_clear/gradcache.py)"
        },
    )
    mlm_chunk_size: int = field(
        default=0,
        metadata={
            "help": "compute the masked-LM terms (CLEAR's, and --sentence-mlm-weight's) in chunks of this many rows, each recomputed in the "
            "backward pass (activation checkpointing, dropout masks replayed), so that with "
            "--contrastive-chunk-size a whole 8,192-sentence batch fits one device and forms ONE "
            "contrastive problem with --update-freq 1; 0 = off. Several ranks need --ddp-backend legacy_ddp"
        },
    )
    accumulate_contrastive: bool = field(
        default=False,
        metadata={
            "help": "one contrastive problem over ALL --update-freq micro-batches of an update (their "
            "views encoded without graph and held, the loss computed once at the last micro-batch, "
            "every held chunk re-encoded in its backward), so per-GPU batch x update-freq x GPUs "
            "sentences are one candidate set (the paper's 8,192 on fewer GPUs); off = each "
            "micro-batch is its own problem. Several ranks need --ddp-backend legacy_ddp"
        },
    )
    hard_negative_weight: float = field(
        default=0.0,
        metadata={
            "help": "SimCSE's log-weight added to an anchor's own hard negative "
            "(supervised pairs with a hard-negative column; 0 = plain)"
        },
    )
    mask_duplicates: bool = field(
        default=False,
        metadata={
            "help": "exact duplicates are not negatives: a candidate of another pair that shares a token "
            "sequence with the anchor's pair (its sentence before augmentation, its positive) is left out "
            "of the anchor's denominator, as is a hard negative equal to either; the count masked per "
            "update is logged as dup_masked (no paper has it; sentence-transformers avoids duplicates in "
            "its batch sampler instead, see --task contrastive_pairs --batch-without-duplicates)"
        },
    )
    guide_model: str = field(
        default="",
        metadata={
            "help": "GISTEmbed's guide (sentence-transformers' GISTEmbedLoss guide): a model directory the "
            "hub loads (a fairseq-clear checkpoint or clear-import-hf's output) with the training data's "
            "dict.txt; it scores the candidates (frozen, never trained or saved) and a candidate it ranks "
            "above the anchor's positive (see --guide-margin) is not a negative; logged as guide_masked; "
            "'' = off"
        },
    )
    guide_checkpoint: str = field(
        default="model.pt", metadata={"help": "the --guide-model directory's checkpoint file"}
    )
    guide_margin: float = field(
        default=0.0,
        metadata={
            "help": "GISTEmbedLoss's margin (sentence-transformers: 0.0): absolute = mask when the guide's "
            "sim > sim(positive) - margin; relative = when sim > sim(positive) - |sim(positive)|·margin "
            "(GISTEmbedLoss's form, as clear-mine-negatives' --relative-margin)"
        },
    )
    guide_margin_strategy: MARGIN_STRATEGIES = field(
        default="absolute",
        metadata={"help": "GISTEmbedLoss's margin_strategy (sentence-transformers: absolute)"},
    )
    no_guide_filter: bool = field(
        default=False,
        metadata={"help": "with --guide-model: no GISTEmbed false-negative filter (above), the guide only teaches "
                  "(--distill-weight)"},
    )
    distill_weight: float = field(
        default=0.0,
        metadata={
            "help": "distillation from --guide-model: weight of Σ KL(softmax(guide sims/τ_t) ‖ softmax(student "
            "sims/τ_s)) over each anchor's in-batch candidates (and --queue-size's rows), itself and its positive "
            "left out (RankCSE's ListNet term, its gamma: 1; ConGen's KL), added to λ·L_CL as a mean over the "
            "anchors; the student must share the guide's dictionary; 0 = off",
            "bounds": (0.0, 1000.0),
        },
    )
    distill_mse_weight: float = field(
        default=0.0,
        metadata={
            "help": "embedding-level distillation from --guide-model: weight of the mean squared error between each "
            "anchor's contrastive vector and the guide's vector of the same view (DistilCSE; sentence-transformers' "
            "MSELoss), a mean over the anchors like L_CL; when the sizes differ, through --distill-mse-projection; "
            "0 = off",
            "bounds": (0.0, 1000.0),
        },
    )
    distill_mse_projection: DISTILL_PROJECTIONS = field(
        default="linear",
        metadata={
            "help": "--distill-mse-weight with a student whose contrastive vectors are not the guide's size: linear = "
            "a learned linear map of the student's vectors to the guide's size (EmbedDistill, Kim et al. 2023; "
            "sentence-transformers' Dense before MSELoss), trained with the model and saved in the checkpoints "
            "(the criterion's state; not exported); none = refuse such a student (no map is used when the sizes "
            "match)"
        },
    )
    distill_temperature: float = field(
        default=0.05,
        metadata={"help": "τ_s of --distill-weight's student similarities (RankCSE: tau2 = 0.05)",
                  "bounds": (1e-4, 100.0)},
    )
    distill_teacher_temperature: float = field(
        default=0.025,
        metadata={"help": "τ_t of --distill-weight's guide similarities (RankCSE: tau2 / 2 = 0.025)",
                  "bounds": (1e-4, 100.0)},
    )
    matryoshka_dims: str = field(
        default="",
        metadata={
            "help": "Matryoshka (Kusupati et al. 2022; sentence-transformers' MatryoshkaLoss, which has no "
            "default): comma-separated sizes, e.g. 768,512,256,128,64; the contrastive loss becomes the "
            "weighted sum of the loss over each prefix of the contrastive vectors (the projection head's "
            "output when the model has one, else the representation that embed() returns); '' = off"
        },
    )
    matryoshka_weights: str = field(
        default="",
        metadata={"help": "one weight per --matryoshka-dims size (sentence-transformers: 1 each); '' = 1 each"},
    )
    hardness_mode: HARDNESS_CHOICES = field(
        default="off",
        metadata={
            "help": "hardness-weighted negatives (sentence-transformers' MultipleNegativesRankingLoss "
            "hardness_mode, Lan et al. 2025 eq. 5): add --hardness-strength x stopgrad(cosine) to the logits of "
            "in_batch_negatives (other pairs' candidates; with nt-xent every other view), hard_negatives (the "
            "anchor's own hard negative: --loss-form simcse with --hard-negatives) or all_negatives (both); "
            "off (sentence-transformers: None)"
        },
    )
    hardness_strength: float = field(
        default=0.0,
        metadata={
            "help": "α of --hardness-mode (sentence-transformers: 0.0; Lan et al. 2025 use 9 for "
            "in_batch_negatives, EmbeddingGemma 5 for hard_negatives); > 0 with a mode, 0 without",
            "bounds": (0.0, 100.0),
        },
    )
    # ESimCSE's code (caskcsg/sentemb: ESimCSE/train.py and esimcse/trainers.py at commit 9ab271bb3f14,
    # esimcse/models.py at fc7ca0dd89c5): --neg_size defaults to 256, --momentum to 0 (the paper: 0.995);
    # the queue holds the momentum encoder's vectors of the first view (the sentence, not the repeated
    # one), encoded in eval mode (no dropout), one rank's own, emptied at each epoch; our differences are
    # in MomentumQueue's docstring
    queue_size: int = field(
        default=0,
        metadata={
            "help": "ESimCSE's momentum contrast (Wu et al. 2022, §3.2): a FIFO queue of this many vectors of past "
            "batches' positives, encoded by a momentum encoder (an average of the model, --queue-momentum; no "
            "dropout, as ESimCSE's code), as extra negatives of every anchor (all ranks' pushed; --mask-duplicates "
            "applies to them); the queue and the momentum encoder are saved in the checkpoints. ESimCSE's paper: "
            "2.5 x the batch size; its code's --neg_size default: 256; 0 = off",
            "bounds": (0, 1_000_000),
        },
    )
    queue_momentum: float = field(
        default=0.995,
        metadata={"help": "m of --queue-size's momentum encoder, θ_m <- m·θ_m + (1 - m)·θ once per update "
                  "(ESimCSE's paper: 0.995; its code moves it at every micro-batch)", "bounds": (0.0, 1.0)},
    )
    sentence_mlm_weight: float = field(
        default=0.0,
        metadata={
            "help": "InfoCSE's sentence-conditioned MLM (Wu et al. 2022): weight of the mean cross-entropy of the "
            "anchor views' masked tokens predicted by the model's decoder (--sentence-mlm-layers) from the view's "
            "sentence vector, beside L_MLM (--mlm off: instead of it) and λ·L_CL (InfoCSE's released BERT-base "
            "script: 1e-5); needs --sentence-mlm-layers; 0 = off",
            "bounds": (0.0, 1000.0),
        },
    )
    sentence_mlm_prob: float = field(
        default=0.4,
        metadata={"help": "share of each anchor view's tokens (not <s>, </s>, [DEL]) replaced by <mask> for "
                  "--sentence-mlm-weight (InfoCSE: 0.4)", "bounds": (0.0, 1.0)},
    )
    world_size: int = II("distributed_training.distributed_world_size")
    ddp_backend: str = II("distributed_training.ddp_backend")
    tpu: bool = II("common.tpu")
    fp16: bool = II("common.fp16")
    bf16: bool = II("common.bf16")
    amp: bool = II("common.amp")
    cpu: bool = II("common.cpu")


#: --sentence-mlm-weight on a model built without --sentence-mlm-layers (refused at start-up when the task
#: built the model, else at the first forward)
SENTENCE_DECODER_MISSING = ("--sentence-mlm-weight needs the model's decoder: give --sentence-mlm-layers 1 or 2 "
                            "(InfoCSE: 2)")


def field_default(name: str):
    """The default of one of :class:`ClearCriterionConfig`'s options."""
    return ClearCriterionConfig.__dataclass_fields__[name].default


def runtime_world_size(configured: int) -> int:
    """The data-parallel world size once torch.distributed is up, else the configured one.

    Under torchrun (env:// launch) fairseq sets the world size after the config's
    interpolations were resolved, so ``cfg.world_size`` still reads 1 there.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        from fairseq.distributed import utils as dist_utils

        return dist_utils.get_data_parallel_world_size()
    return configured


def matryoshka_sizes(cfg, task):
    """:func:`matryoshka`, checked against the size of the vectors the loss compares
    (``task.contrastive_dim``, set where the task builds the model)."""
    dims, weights = matryoshka(cfg)
    dim = getattr(task, "contrastive_dim", None)
    if dims is not None and dim is not None and dims[0] > dim:
        raise ClearCriterionError(f"--matryoshka-dims {cfg.matryoshka_dims}: the largest size is more than the "
                                  f"{dim} dimensions of the contrastive vectors (the projection head's output "
                                  "when the model has one, else the representation)")
    if dims is not None and getattr(task, "contrastive_head", None) == "projection":
        logger.warning("--matryoshka-dims trains prefixes of the projection head's output, not of the "
                       "representation that embed() returns by default (head='projection' gives the trained "
                       "vectors); for nested representations train with --projection-layers 0")
    return dims, weights


def check_hardness(cfg, task) -> None:
    """--hardness-mode/--hardness-strength: refused where the weighting would change nothing (a mode
    with α = 0, α without a mode, hard_negatives without hard negatives), which sentence-transformers
    only warns about or ignores."""
    mode, strength = str(cfg.hardness_mode), cfg.hardness_strength
    if not 0.0 <= strength <= 100.0:  # written so that nan fails too
        raise ClearCriterionError(f"--hardness-strength must be in 0..100, got {strength}")
    if mode == "off":
        if strength > 0:
            raise ClearCriterionError(f"--hardness-strength {strength} needs a --hardness-mode (e.g. "
                                      "in_batch_negatives); it is off")
        return
    if strength == 0:
        raise ClearCriterionError(f"--hardness-mode {mode} needs --hardness-strength > 0 (Lan et al. 2025: 9 for "
                                  "in_batch_negatives; EmbeddingGemma: 5 for hard_negatives)")
    if mode == "hard_negatives" and not (cfg.loss_form == "simcse" and getattr(task, "uses_hard_negatives", False)):
        raise ClearCriterionError("--hardness-mode hard_negatives weighs the anchors' own hard negatives, which only "
                                  "--loss-form simcse with a hard-negative column (--hard-negatives) has; use "
                                  "in_batch_negatives")


def check_distillation(cfg) -> None:
    """--distill-weight and its temperatures (nan fails: the comparisons are written to)."""
    for flag, value, low, high in (("--distill-weight", cfg.distill_weight, 0.0, 1000.0),
                                   ("--distill-mse-weight", cfg.distill_mse_weight, 0.0, 1000.0),
                                   ("--distill-temperature", cfg.distill_temperature, 1e-4, 100.0),
                                   ("--distill-teacher-temperature", cfg.distill_teacher_temperature, 1e-4, 100.0)):
        if not low <= value <= high:
            raise ClearCriterionError(f"{flag} must be in {low:g}..{high:g}, got {value}")
    for flag, weight in (("--distill-weight", cfg.distill_weight), ("--distill-mse-weight", cfg.distill_mse_weight)):
        if weight > 0 and not cfg.guide_model:
            raise ClearCriterionError(f"{flag} distils --guide-model, but no --guide-model was given")
        if weight > 0 and cfg.cl_weight == 0:
            raise ClearCriterionError(f"{flag} compares the contrastive views' vectors, which --cl-weight 0 does "
                                      "not encode")
    if cfg.no_guide_filter and cfg.distill_weight == 0 and cfg.distill_mse_weight == 0:
        raise ClearCriterionError("--no-guide-filter leaves --guide-model nothing to do without --distill-weight "
                                  "or --distill-mse-weight")


def contrastive_loss_options(cfg) -> tuple:
    """(flag, value) of the options that act on the contrastive loss itself (a false value: not given)."""
    return (("--queue-size", cfg.queue_size), ("--matryoshka-dims", cfg.matryoshka_dims),
            ("--hardness-mode", "" if str(cfg.hardness_mode) == "off" else cfg.hardness_mode))


def check_config(cfg, task, world_size: int) -> None:
    """Refuse, naming the option, what would fail later deep inside fairseq or torch, or train
    something else than asked."""
    # written so that nan and inf fail too (nan compares false with everything)
    if not 0 < cfg.temperature < math.inf:
        raise ValueError(f"--temperature must be > 0 and finite, got {cfg.temperature}")
    if not 0 <= cfg.cl_weight < math.inf:
        raise ValueError(f"--cl-weight must be >= 0 and finite, got {cfg.cl_weight}")
    if not math.isfinite(cfg.hard_negative_weight):
        raise ValueError(f"--hard-negative-weight must be finite, got {cfg.hard_negative_weight}")
    # "is True": a config built by hand holds the unresolved "${common...}" strings
    fp16, tpu, amp, cpu = (getattr(cfg, k, False) is True for k in ("fp16", "tpu", "amp", "cpu"))
    if (fp16 or amp) and (cpu or not torch.cuda.is_available()):
        flag = "--fp16" if fp16 else "--amp"
        raise ValueError(f"{flag} needs a CUDA GPU: fairseq's mixed-precision optimizer and loss scaler "
                         f"are CUDA-only; on CPU train in fp32 (leave out {flag})")
    if tpu and importlib.util.find_spec("torch_xla") is None:  # --bf16 alone: fairseq_fixes/bf16_without_tpu.py
        implied = (" (fairseq's argument parsing turns --bf16 into --tpu; a fairseq-clear run's "
                   "start-up undoes that unless --tpu was given)") if cfg.bf16 is True else ""
        raise ValueError(f"--tpu{implied} needs torch_xla, which is not installed; leave out --tpu "
                         "(--bf16 trains in bfloat16 on the GPU or CPU without it)")
    if cfg.gather_negatives == "on" and world_size <= 1:
        raise ValueError("--gather-negatives on needs distributed training, but the world size is "
                         f"{world_size}; use 'auto' or 'off'")
    for flag, value in (("--contrastive-chunk-size", cfg.contrastive_chunk_size),
                        ("--mlm-chunk-size", cfg.mlm_chunk_size)):
        if value < 0:
            raise ValueError(f"{flag} must be >= 0, got {value}")
    ddp_backend = str(getattr(cfg, "ddp_backend", "pytorch_ddp"))
    reencoding = "the re-encoding backward makes parameters ready more than once, which torch's DDP refuses"
    for flag, value, why in (("--contrastive-chunk-size", cfg.contrastive_chunk_size, reencoding),
                             ("--mlm-chunk-size", cfg.mlm_chunk_size, reencoding),
                             ("--accumulate-contrastive", cfg.accumulate_contrastive, reencoding),
                             ("--queue-size", cfg.queue_size, "fairseq wraps a criterion that holds state in "
                              "torch's DDP, which refuses a module with nothing to train")):
        if value > 0 and world_size > 1 and ddp_backend not in ("legacy_ddp", "no_c10d"):
            raise ValueError(f"{flag} with several ranks needs --ddp-backend legacy_ddp: {why}")
    matryoshka(cfg)
    if getattr(task, "is_contrastive", True) is False:  # --mlm-only: the criterion computes the masked LM alone
        for flag, value in contrastive_loss_options(cfg) + (
                ("--guide-model", cfg.guide_model), ("--distill-weight", cfg.distill_weight),
                ("--distill-mse-weight", cfg.distill_mse_weight), ("--sentence-mlm-weight", cfg.sentence_mlm_weight)):
            if value:
                raise ClearCriterionError(f"{flag} acts on the contrastive views, which --mlm-only leaves out "
                                          "(the masked LM is its only loss); leave out one of the two")
    check_hardness(cfg, task)
    check_distillation(cfg)
    for flag, value, ok, allowed in (  # written so that nan fails too
            ("--queue-size", cfg.queue_size, 0 <= cfg.queue_size <= 1_000_000, "0..1000000"),
            ("--queue-momentum", cfg.queue_momentum, 0.0 <= cfg.queue_momentum < 1.0, "[0, 1)"),
            ("--sentence-mlm-weight", cfg.sentence_mlm_weight, 0.0 <= cfg.sentence_mlm_weight <= 1000.0, "0..1000"),
            ("--sentence-mlm-prob", cfg.sentence_mlm_prob, 0.0 < cfg.sentence_mlm_prob <= 1.0, "(0, 1]")):
        if not ok:
            raise ClearCriterionError(f"{flag} must be in {allowed}, got {value}")
    if cfg.queue_size > 0 and cfg.gather_negatives == "off" and world_size > 1:
        # each rank would queue only its own positives: the ranks' queues would differ, and a
        # checkpoint (rank 0's criterion state) could not resume the others'
        raise ClearCriterionError(f"--queue-size with --gather-negatives off on {world_size} ranks: each rank would "
                                  "keep a queue of its own, which a checkpoint cannot restore; use --gather-negatives "
                                  "auto (the queue then holds every rank's positives)")
    if cfg.cl_weight == 0:
        for flag, value in contrastive_loss_options(cfg):
            if value:
                raise ClearCriterionError(f"{flag} acts on the contrastive loss, which --cl-weight 0 turns off")
    if not math.isfinite(cfg.guide_margin):
        raise ClearCriterionError(f"--guide-margin must be finite, got {cfg.guide_margin}")
    unused = [(f"--queue-momentum {cfg.queue_momentum}", "--queue-size", cfg.queue_size > 0,
               cfg.queue_momentum != field_default("queue_momentum")),
              (f"--distill-temperature {cfg.distill_temperature}", "--distill-weight", cfg.distill_weight > 0,
               cfg.distill_temperature != field_default("distill_temperature")),
              (f"--distill-teacher-temperature {cfg.distill_teacher_temperature}", "--distill-weight",
               cfg.distill_weight > 0, cfg.distill_teacher_temperature != field_default("distill_teacher_temperature")),
              (f"--sentence-mlm-prob {cfg.sentence_mlm_prob}", "--sentence-mlm-weight", cfg.sentence_mlm_weight > 0,
               cfg.sentence_mlm_prob != field_default("sentence_mlm_prob"))]
    for flag, name in (("--guide-margin", "guide_margin"), ("--guide-margin-strategy", "guide_margin_strategy")):
        # the margin decides which candidates the guide's filter masks: nothing without the filter
        value = getattr(cfg, name)
        if str(value) != str(field_default(name)) and cfg.guide_model and cfg.no_guide_filter:
            raise ClearCriterionError(f"{flag} {value} has no effect with --no-guide-filter (it sets which "
                                      "candidates the guide's filter masks); leave out one of the two")
        unused.append((f"{flag} {value}", "--guide-model", bool(cfg.guide_model),
                       str(value) != str(field_default(name))))
    for given, needs, on, changed in unused:
        if changed and not on:
            raise ClearCriterionError(f"{given} has no effect without {needs}; give {needs} too, or leave it out")
    if cfg.sentence_mlm_weight > 0 and cfg.cl_weight == 0:
        raise ClearCriterionError("--sentence-mlm-weight predicts the contrastive views' tokens, which --cl-weight 0 "
                                  "does not read")
    if cfg.sentence_mlm_weight > 0 and getattr(task, "model_has_sentence_decoder", None) is False:
        raise ClearCriterionError(SENTENCE_DECODER_MISSING)
    if cfg.sentence_mlm_weight > 0 and getattr(task, "contrastive_views_masked", False):
        # its targets would be the views' <mask> and MLM's random replacements, not the text
        raise ClearCriterionError("--sentence-mlm-weight predicts the anchor views' tokens, and this task's anchors "
                                  "are the MLM's masked ones (<mask> in place of their tokens); give "
                                  "--contrast-clean-anchors, or --mlm off")
    if getattr(task, "uses_hard_negatives", False) and cfg.loss_form != "simcse":
        # nt-xent has no place for them: they would be dropped without a word
        raise ValueError("the task feeds hard negatives (--hard-negatives), which only --loss-form "
                         "simcse uses; pass --loss-form simcse, or --hard-negatives off")
