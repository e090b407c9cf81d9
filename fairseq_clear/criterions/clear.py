"""CLEAR's loss: L = L_MLM + λ·L_CL (Wu et al. 2020, eq. 3).

Normalisation. fairseq divides the summed gradient by the summed
``sample_size`` of all ranks. L_MLM is RoBERTa's mean cross-entropy over the
masked tokens. The paper's eq. 2 *sums* l(i, j) over the 2N views; summed, the
contrastive term would grow with the batch (8,192 sentences give 16,384
terms) and swamp the MLM mean, so L_CL here is the *mean* over the 2N anchors
(as in SimCLR's code) and λ = 1 keeps eq. 3's balance at any batch size.
Each rank returns ``mlm_sum·U/S + λ·cl_sum·U/V`` with ``sample_size = U_rank``,
where S and V are the global masked-token and anchor counts (exchanged in the
same collective as the view counts) and U = S (or V when nothing is masked),
so the update is exactly ∇(L_MLM + λ·L_CL) over the global batch.

Losses are logged in bits (base 2), like fairseq's ``masked_lm``.
"""

import importlib.util
import logging
import math
from dataclasses import dataclass, field

import torch
from fairseq import metrics, modules, utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from omegaconf import II

from .. import distributed, losses, paper_defaults
from ..gradcache import attach, cached_encode, encode_without_graph

logger = logging.getLogger(__name__)

LOSS_FORMS = ChoiceEnum(["paper", "nt-xent", "simcse"])
GATHER_CHOICES = ChoiceEnum(["auto", "on", "off"])


@dataclass
class ClearCriterionConfig(FairseqDataclass):
    cl_weight: float = field(
        default=1.0,
        metadata={"help": "λ in L = L_MLM + λ·L_CL (paper eq. 3: 1); 0 trains MLM only"},
    )
    # NaN, not None, for "not given": fairseq's generation config shares --temperature
    # and cannot take None
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
    world_size: int = II("distributed_training.distributed_world_size")
    ddp_backend: str = II("distributed_training.ddp_backend")
    tpu: bool = II("common.tpu")
    fp16: bool = II("common.fp16")
    bf16: bool = II("common.bf16")
    amp: bool = II("common.amp")
    cpu: bool = II("common.cpu")


def _device_of(sample):
    for value in sample.values():
        if torch.is_tensor(value):
            return value.device
        if isinstance(value, dict):
            found = _device_of(value)
            if found is not None:
                return found
    return None


def _runtime_world_size(configured: int) -> int:
    """The data-parallel world size once torch.distributed is up, else the configured one.

    Under torchrun (env:// launch) fairseq sets the world size after the config's
    interpolations were resolved, so ``cfg.world_size`` still reads 1 there.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        from fairseq.distributed import utils as dist_utils

        return dist_utils.get_data_parallel_world_size()
    return configured


@register_criterion("clear", dataclass=ClearCriterionConfig)
class ClearCriterion(FairseqCriterion):
    def __init__(self, cfg: ClearCriterionConfig, task):
        super().__init__(task)
        model_args = getattr(task, "model_args", None)  # set by ClearRobertaModel.build_model
        paper_defaults.fill(cfg, ("temperature", "loss_form"), task, "criterion", model_args,
                            unset={"temperature": math.isnan, "loss_form": lambda v: v == "paper"})
        # written so that nan and inf fail too (nan compares false with everything)
        if not 0 < cfg.temperature < math.inf:
            raise ValueError(f"--temperature must be > 0 and finite, got {cfg.temperature}")
        if not 0 <= cfg.cl_weight < math.inf:
            raise ValueError(f"--cl-weight must be >= 0 and finite, got {cfg.cl_weight}")
        if not math.isfinite(cfg.hard_negative_weight):
            raise ValueError(f"--hard-negative-weight must be finite, got {cfg.hard_negative_weight}")
        # else fairseq fails later, deep inside (a CUDA assertion, or torch_xla missing);
        # "is True": a config built by hand holds the unresolved "${common...}" strings
        fp16, tpu, amp, cpu = (getattr(cfg, k, False) is True for k in ("fp16", "tpu", "amp", "cpu"))
        if (fp16 or amp) and (cpu or not torch.cuda.is_available()):
            flag = "--fp16" if fp16 else "--amp"
            raise ValueError(
                f"{flag} needs a CUDA GPU: fairseq's mixed-precision optimizer and loss "
                f"scaler are CUDA-only; on CPU train in fp32 (leave out {flag})"
            )
        # --bf16 alone runs on the GPU or CPU (fairseq_fixes/bf16_without_tpu.py)
        if tpu and importlib.util.find_spec("torch_xla") is None:
            implied = (" (fairseq's argument parsing turns --bf16 into --tpu; a fairseq-clear run's "
                       "start-up undoes that unless --tpu was given)") if cfg.bf16 is True else ""
            raise ValueError(f"--tpu{implied} needs torch_xla, which is not installed; leave out --tpu "
                             "(--bf16 trains in bfloat16 on the GPU or CPU without it)")
        world_size = _runtime_world_size(cfg.world_size)
        if cfg.gather_negatives == "on" and world_size <= 1:
            raise ValueError(
                "--gather-negatives on needs distributed training, but the world size is "
                f"{world_size}; use 'auto' or 'off'"
            )
        if cfg.contrastive_chunk_size < 0:
            raise ValueError(f"--contrastive-chunk-size must be >= 0, got {cfg.contrastive_chunk_size}")
        if cfg.mlm_chunk_size < 0:
            raise ValueError(f"--mlm-chunk-size must be >= 0, got {cfg.mlm_chunk_size}")
        ddp_backend = str(getattr(cfg, "ddp_backend", "pytorch_ddp"))
        for flag, value in (("--contrastive-chunk-size", cfg.contrastive_chunk_size),
                            ("--mlm-chunk-size", cfg.mlm_chunk_size),
                            ("--accumulate-contrastive", cfg.accumulate_contrastive)):
            if value > 0 and world_size > 1 and ddp_backend not in ("legacy_ddp", "no_c10d"):
                raise ValueError(
                    f"{flag} with several ranks needs --ddp-backend legacy_ddp: the re-encoding "
                    "backward makes parameters ready more than once, which torch's DDP refuses"
                )
        if getattr(task, "uses_hard_negatives", False) and cfg.loss_form != "simcse":
            # nt-xent has no place for them: they would be dropped without a word
            raise ValueError(
                "the task feeds hard negatives (--hard-negatives), which only --loss-form "
                "simcse uses; pass --loss-form simcse, or --hard-negatives off"
            )
        self.cfg = cfg
        self._held = []
        self.gather = cfg.gather_negatives == "on" or (
            cfg.gather_negatives == "auto" and world_size > 1
        )

    # ---- masked LM -------------------------------------------------------------
    def _mlm(self, model, net_input, target):
        """Summed cross-entropy over masked tokens, as fairseq's masked_lm criterion; with
        --mlm-chunk-size, chunk by chunk, each recomputed in the backward pass."""
        n_masked = target.ne(self.padding_idx).sum()
        rows, chunk = target.size(0), self.cfg.mlm_chunk_size
        if chunk <= 0 or rows <= chunk or not (model.training and torch.is_grad_enabled()):
            return self._mlm_rows(model, net_input, target), n_masked
        from torch.utils.checkpoint import checkpoint

        loss = None
        for start in range(0, rows, chunk):
            part = {k: v[start:start + chunk] if torch.is_tensor(v) and v.dim() > 0 and v.size(0) == rows else v
                    for k, v in net_input.items()}
            # non-reentrant: keeps only the inputs; the RNG state is saved and restored around
            # the recomputation, so dropout is replayed and the RNG ends where the forward left it
            piece = checkpoint(self._mlm_rows, model, part, target[start:start + chunk], use_reentrant=False)
            loss = piece if loss is None else loss + piece
        return loss, n_masked

    def _mlm_rows(self, model, net_input, target):
        masked = target.ne(self.padding_idx)
        # with nothing masked the LM head sees 0 rows and the sum is 0
        logits = model(**net_input, masked_tokens=masked)[0]
        loss = modules.cross_entropy(
            logits.view(-1, logits.size(-1)),
            target[masked].view(-1),
            reduction="sum",
            ignore_index=self.padding_idx,
        )
        return loss

    # ---- contrastive -----------------------------------------------------------
    def _encoder(self, model):
        return lambda src: model(src, contrastive=True)[0]

    def _split_views(self, z, views, dummy):
        """Vectors of the anchors, of the (averaged) positives and of the hard negatives."""
        n = views["num_anchors"]
        p = views.get("positives_per_anchor", 1)
        za = z[:n]
        zp = z[n : n + n * p].view(n, p, -1).mean(dim=1)  # DeCLUTR: mean of P positives
        zh = z[n + n * p :] if views.get("hard_negatives", False) else None
        if dummy:
            # fairseq's stand-in batch on a rank without data: take part in the
            # collectives but lend no views to the other ranks
            za, zp = za[:0], zp[:0]
            zh = zh[:0] if zh is not None else None
        return za, zp, zh

    def _embed_views(self, model, views):
        z = cached_encode(self._encoder(model), views["src_tokens"],
                          self.cfg.contrastive_chunk_size if model.training else 0, model.parameters())
        return self._split_views(z, views, getattr(self.task, "dummy_batch", False))

    def _contrastive(self, za, zp, zh, n_masked, training):
        """(summed loss, correct, local anchors, global anchors, global [pairs, masked tokens])."""
        device = za.device
        n = za.size(0)
        if self.gather and training:
            group = self._group()
            gathered = distributed.all_gather_counts([n, n_masked], group, device)
            sizes = gathered[:, 0].tolist()
            counts = gathered.sum(0).tolist()
            rank = torch.distributed.get_rank(group=group)
            offset = sum(sizes[:rank])
            za = distributed.gather_with_grad(za, sizes, group)
            zp = distributed.gather_with_grad(zp, sizes, group)
            if zh is not None:
                zh = distributed.gather_with_grad(zh, sizes, group)
        else:
            offset = 0
            counts = [n, n_masked]
        rows = torch.arange(offset, offset + n, device=device)
        if self.cfg.loss_form == "nt-xent":
            cl_sum, correct = losses.nt_xent(za, zp, self.cfg.temperature, rows)
            return cl_sum, correct, 2 * n, 2 * counts[0], counts
        cl_sum, correct = losses.simcse(za, zp, self.cfg.temperature, rows, zh, self.cfg.hard_negative_weight)
        return cl_sum, correct, n, counts[0], counts

    @property
    def holds_views_across_update(self) -> bool:
        """True with --accumulate-contrastive inside fairseq's trainer: the task then leaves
        stand-in batches to us (their terms are zeroed here, on every path)."""
        return bool(self.cfg.accumulate_contrastive) and getattr(self.task, "micro_batch", None) is not None

    def _update_position(self, model, views):
        """(index, count) of this micro-batch in its update when the contrastive loss spans the update."""
        if not (self.cfg.accumulate_contrastive and views and model.training and torch.is_grad_enabled()):
            return None
        return getattr(self.task, "micro_batch", None)  # None outside fairseq's trainer: per micro-batch

    def forward(self, model, sample, reduce=True):
        device = _device_of(sample)
        mlm_sum = torch.zeros((), device=device)
        n_masked = torch.zeros((), dtype=torch.long, device=device)
        if "target" in sample:
            mlm_sum, n_masked = self._mlm(model, sample["net_input"], sample["target"])
        mlm2_sum = None
        if "target2" in sample:  # Double-MLM baseline (§5.1)
            mlm2_sum, n_masked2 = self._mlm(model, sample["net_input2"], sample["target2"])

        views = sample.get("contrastive") if self.cfg.cl_weight > 0 else None
        position = self._update_position(model, views)
        if position is not None:
            return self._forward_across_update(model, sample, views, position, mlm_sum, n_masked)
        dummy = getattr(self.task, "dummy_batch", False)
        cl_sum = correct = None
        n_anchor_local = 0
        counts = None
        if views:
            za, zp, zh = self._embed_views(model, views)
            device = za.device
            # a dummy batch's masked tokens are not data: counting them in the
            # global normaliser would overweight L_CL on the other ranks
            cl_sum, correct, n_anchor_local, anchors_global, counts = self._contrastive(
                za, zp, zh, 0 if dummy else int(n_masked), model.training)

        # normaliser units: masked tokens if any are masked anywhere, else anchors
        masked_global = counts[1] if counts is not None else int(n_masked)
        if masked_global > 0:
            unit_local, unit_global = n_masked.float(), float(masked_global)
        else:
            unit_local = torch.tensor(float(n_anchor_local), device=device)
            unit_global = float(anchors_global) if cl_sum is not None else 1.0
        loss = mlm_sum.float() * (unit_global / max(masked_global, 1))
        if mlm2_sum is not None:
            loss = loss + mlm2_sum.float() * (unit_global / max(int(n_masked2), 1))
        if cl_sum is not None:
            loss = loss + self.cfg.cl_weight * cl_sum * (unit_global / max(anchors_global, 1))

        if dummy and self.holds_views_across_update:
            loss = loss * 0.0  # fairseq's ignore_grad, left to us by the task
        logging_output = self._logging(loss, mlm_sum, n_masked, sample, unit_local)
        if mlm2_sum is not None:
            logging_output["mlm2_loss"] = mlm2_sum.data
            logging_output["n_masked2"] = n_masked2.data
        if cl_sum is not None:
            logging_output.update(cl_loss=cl_sum.data, cl_correct=correct.data, cl_anchors=n_anchor_local)
        return loss, unit_local, logging_output

    @staticmethod
    def _logging(loss, mlm_sum, n_masked, sample, sample_size):
        return {
            "loss": loss.data,
            "mlm_loss": mlm_sum.data,
            "n_masked": n_masked.data if torch.is_tensor(n_masked) else n_masked,
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": sample_size,
        }

    def _forward_across_update(self, model, sample, views, position, mlm_sum, n_masked):
        """--accumulate-contrastive: ONE contrastive problem over every micro-batch of the update.

        Each micro-batch's views are encoded without their graph and held (vectors, tokens,
        RNG state); its MLM term is returned as usual. At the last micro-batch the loss over
        all held vectors (gathered across ranks) is added, and its backward encodes every
        held chunk again with its graph (gradcache.attach). Units: masked tokens when the task
        masks, else anchors; the update's gradient is that of one batch of all micro-batches.
        """
        index, count = position
        if index == 0:
            self._held = []
        dummy = getattr(self.task, "dummy_batch", False)
        masked_units = "target" in sample
        if dummy:  # the task leaves the stand-in to us (holds_views_across_update)
            mlm_sum, n_masked = mlm_sum * 0.0, n_masked * 0
        encode = self._encoder(model)
        pieces = encode_without_graph(encode, views["src_tokens"], self.cfg.contrastive_chunk_size)
        layout = {k: views[k] for k in ("num_anchors", "positives_per_anchor", "hard_negatives") if k in views}
        self._held.append((pieces, layout, dummy, int(n_masked)))
        pairs = 0 if dummy else views["num_anchors"]
        anchors_here = 2 * pairs if self.cfg.loss_form == "nt-xent" else pairs
        unit_local = n_masked.float() if masked_units else torch.tensor(float(anchors_here), device=mlm_sum.device)

        if index < count - 1:
            # the contrastive term comes at the last micro-batch; a zero that is part of the
            # graph keeps optimizer.backward() valid when there is no MLM term either
            trainable = next((p for p in model.parameters() if p.requires_grad), None)
            loss = mlm_sum.float() if masked_units or trainable is None else trainable.sum() * 0.0
            logging_output = self._logging(loss, mlm_sum, n_masked, sample, unit_local)
            # the same keys and kinds in every micro-batch: fairseq's distributed stat sync sums the keys
            # of the first logging output only, with tensors and numbers reduced apart
            zero = torch.zeros((), device=mlm_sum.device)
            logging_output.update(cl_loss=zero, cl_correct=zero.long(), cl_anchors=0)
            return loss, unit_local, logging_output

        held, self._held = self._held, []
        z = attach(encode, [p for h in held for p in h[0]], model.parameters())
        parts, offset = [], 0
        for pieces_i, layout_i, dummy_i, _ in held:
            rows = sum(p.out.size(0) for p in pieces_i)
            parts.append(self._split_views(z[offset : offset + rows], layout_i, dummy_i))
            offset += rows
        za = torch.cat([a for a, _, _ in parts])
        zp = torch.cat([b for _, b, _ in parts])
        zh = torch.cat([h for _, _, h in parts]) if parts[0][2] is not None else None
        cl_sum, correct, n_anchor_local, anchors_global, counts = self._contrastive(
            za, zp, zh, sum(h[3] for h in held), True)
        scale = counts[1] / max(anchors_global, 1) if masked_units else 1.0
        loss = mlm_sum.float() + self.cfg.cl_weight * cl_sum * scale
        logging_output = self._logging(loss, mlm_sum, n_masked, sample, unit_local)
        logging_output.update(cl_loss=cl_sum.data, cl_correct=correct.data, cl_anchors=n_anchor_local)
        return loss, unit_local, logging_output

    def _group(self):
        from fairseq.distributed import utils as dist_utils

        return dist_utils.get_data_parallel_group()

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(float(log.get(key, 0)) for log in logging_outputs)

        sample_size = total("sample_size")
        metrics.log_scalar(
            "loss", total("loss") / max(sample_size, 1e-8) / math.log(2), sample_size, round=3
        )
        n_masked = total("n_masked")
        if n_masked > 0:
            metrics.log_scalar(
                "mlm_loss", total("mlm_loss") / n_masked / math.log(2), n_masked, round=3
            )
            metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["mlm_loss"].avg))
        n_masked2 = total("n_masked2")
        if n_masked2 > 0:
            metrics.log_scalar(
                "mlm2_loss", total("mlm2_loss") / n_masked2 / math.log(2), n_masked2, round=3
            )
        anchors = total("cl_anchors")
        if anchors > 0:
            metrics.log_scalar(
                "cl_loss", total("cl_loss") / anchors / math.log(2), anchors, round=3
            )
            metrics.log_scalar("cl_acc", 100.0 * total("cl_correct") / anchors, anchors, round=2)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
