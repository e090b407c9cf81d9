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

logger = logging.getLogger(__name__)

LOSS_FORMS = ChoiceEnum(["paper", "nt-xent", "simcse"])
GATHER_CHOICES = ChoiceEnum(["auto", "on", "off"])
MARGIN_STRATEGIES = ChoiceEnum(["absolute", "relative"])


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
            "node); 0 = off. Several ranks need --ddp-backend legacy_ddp (see fairseq_clear/gradcache.py)"
        },
    )
    mlm_chunk_size: int = field(
        default=0,
        metadata={
            "help": "compute the masked-LM term in chunks of this many rows, each recomputed in the "
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
    world_size: int = II("distributed_training.distributed_world_size")
    ddp_backend: str = II("distributed_training.ddp_backend")
    tpu: bool = II("common.tpu")
    fp16: bool = II("common.fp16")
    bf16: bool = II("common.bf16")
    amp: bool = II("common.amp")
    cpu: bool = II("common.cpu")


def runtime_world_size(configured: int) -> int:
    """The data-parallel world size once torch.distributed is up, else the configured one.

    Under torchrun (env:// launch) fairseq sets the world size after the config's
    interpolations were resolved, so ``cfg.world_size`` still reads 1 there.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        from fairseq.distributed import utils as dist_utils

        return dist_utils.get_data_parallel_world_size()
    return configured


def _numbers(text: str, kind, flag: str) -> list:
    try:
        return [kind(x) for x in str(text or "").replace(" ", "").split(",") if x]
    except ValueError:
        raise ClearCriterionError(f"{flag} must be comma-separated numbers, got {text!r}") from None


def matryoshka(cfg):
    """(dims, weights) of --matryoshka-dims/--matryoshka-weights, largest first; (None, None) when off."""
    dims = _numbers(cfg.matryoshka_dims, int, "--matryoshka-dims")
    weights = _numbers(cfg.matryoshka_weights, float, "--matryoshka-weights")
    if not dims:
        if weights:
            raise ClearCriterionError("--matryoshka-weights needs --matryoshka-dims")
        return None, None
    if min(dims) < 1 or len(set(dims)) != len(dims):
        raise ClearCriterionError(f"--matryoshka-dims must be distinct sizes >= 1, got {cfg.matryoshka_dims!r}")
    if not weights:
        weights = [1.0] * len(dims)
    if len(weights) != len(dims):
        raise ClearCriterionError(f"--matryoshka-weights gives {len(weights)} weights for {len(dims)} "
                                  f"--matryoshka-dims sizes")
    if not all(0 <= w < math.inf for w in weights) or not any(w > 0 for w in weights):
        raise ClearCriterionError(f"--matryoshka-weights must be finite, >= 0 and not all 0, got "
                                  f"{cfg.matryoshka_weights!r}")
    order = sorted(range(len(dims)), key=lambda i: -dims[i])
    return [dims[i] for i in order], [weights[i] for i in order]


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
    for flag, value in (("--contrastive-chunk-size", cfg.contrastive_chunk_size),
                        ("--mlm-chunk-size", cfg.mlm_chunk_size),
                        ("--accumulate-contrastive", cfg.accumulate_contrastive)):
        if value > 0 and world_size > 1 and ddp_backend not in ("legacy_ddp", "no_c10d"):
            raise ValueError(f"{flag} with several ranks needs --ddp-backend legacy_ddp: the re-encoding "
                             "backward makes parameters ready more than once, which torch's DDP refuses")
    matryoshka(cfg)
    if not math.isfinite(cfg.guide_margin):
        raise ClearCriterionError(f"--guide-margin must be finite, got {cfg.guide_margin}")
    if getattr(task, "uses_hard_negatives", False) and cfg.loss_form != "simcse":
        # nt-xent has no place for them: they would be dropped without a word
        raise ValueError("the task feeds hard negatives (--hard-negatives), which only --loss-form "
                         "simcse uses; pass --loss-form simcse, or --hard-negatives off")
