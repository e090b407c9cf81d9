"""CLEAR's loss: L = L_MLM + λ·L_CL (Wu et al. 2020, eq. 3), for every task of the plugin (plus
--distill-weight's term from the guide, a mean over the same anchors as L_CL, and
--sentence-mlm-weight's InfoCSE term, a mean over its own masked tokens).

One path: the MLM term when the batch carries targets, then the contrastive problem that this
call completes (this micro-batch's views; with --accumulate-contrastive, at the update's last
micro-batch, every held micro-batch's), weighed by :func:`weighted_loss`.

Normalisation. fairseq divides the summed gradient by the summed ``sample_size`` of all
ranks. L_MLM is RoBERTa's mean cross-entropy over the masked tokens. The paper's eq. 2 *sums*
l(i, j) over the 2N views; summed, the contrastive term would grow with the batch (8,192
sentences give 16,384 terms) and swamp the MLM mean, so L_CL here is the *mean* over the 2N
anchors (as in SimCLR's code) and λ = 1 keeps eq. 3's balance at any batch size. With S and V
the global masked-token and anchor counts (exchanged in the same collective as the view
counts), each rank returns ``mlm_sum + λ·cl_sum·S/V`` with ``sample_size`` its masked tokens
(or ``λ·cl_sum`` with its anchors when nothing is masked), so the update is exactly
∇(L_MLM + λ·L_CL) over the global batch.

The task's only state read here is its :class:`~fairseq_clear.tasks.contrastive.Step`.
Losses are logged in bits (base 2), like fairseq's ``masked_lm``.
"""

import logging
import math

import torch
from fairseq import metrics, modules, utils
from fairseq.criterions import FairseqCriterion, register_criterion

from .. import distributed, losses, negatives, paper_defaults
from ..data.contrastive_layout import Part, split_views
from ..gradcache import attach, cached_encode, encode_without_graph
from ..fairseq_fixes import scope
from ..guide import GuideModel
from ..momentum_queue import MomentumQueue
from .clear_config import (  # noqa: F401  (re-exported)
    SENTENCE_DECODER_MISSING,
    ClearCriterionConfig,
    ClearCriterionError,
    check_config,
    matryoshka,
    matryoshka_sizes,
    runtime_world_size,
)

logger = logging.getLogger(__name__)

def _device_of(sample):
    for value in sample.values():
        if torch.is_tensor(value):
            return value.device
        if isinstance(value, dict):
            found = _device_of(value)
            if found is not None:
                return found
    return None


def weighted_loss(mlm_sum, cl_sum, cl_weight: float, masked: int, anchors: int):
    """The loss to return for one contrastive problem, such that fairseq's division of the summed
    gradient by the summed ``sample_size`` gives ∇(L_MLM + λ·L_CL) (module docstring):

    * ``masked`` > 0 (the global masked-token count S; sample_size counts masked tokens):
      ``mlm_sum + λ·cl_sum·S/V``, with V = ``anchors``, the global anchor count;
    * ``masked`` == 0 (sample_size counts anchors): ``mlm_sum + λ·cl_sum``.
    """
    scale = masked / max(anchors, 1) if masked > 0 else 1.0
    return mlm_sum + cl_weight * cl_sum * scale


@register_criterion("clear", dataclass=ClearCriterionConfig)
class ClearCriterion(FairseqCriterion):
    """L = L_MLM + λ·L_CL for every contrastive task (CLEAR, SimCSE, DeCLUTR, labelled pairs, CLSR)."""

    def __init__(self, cfg: ClearCriterionConfig, task):
        super().__init__(task)
        scope.component_built(cfg, "criterion clear")  # inside a fairseq command: the run is ours
        # the plugin's tasks resolved these in build_criterion; with another task, CLEAR's
        paper_defaults.fill(cfg, paper_defaults.CRITERION_OPTIONS, "clear", "criterion")
        world_size = runtime_world_size(cfg.world_size)
        check_config(cfg, task, world_size)
        self.cfg = cfg
        self._held = []  # --accumulate-contrastive: the update's micro-batches so far
        self.dims, self.dim_weights = matryoshka_sizes(cfg, task)
        self.guide = GuideModel.load(cfg, task)
        self.gather = cfg.gather_negatives == "on" or (cfg.gather_negatives == "auto" and world_size > 1)
        self.hardness = {"hardness_mode": None if cfg.hardness_mode == "off" else str(cfg.hardness_mode),
                         "hardness_strength": cfg.hardness_strength}
        #: the distillation terms the options turn on (logged under these names), with their weights
        self.distill = {k: w for k, w in (("kd_loss", cfg.distill_weight), ("kd_mse", cfg.distill_mse_weight)) if w > 0}
        self.distill_projection = None
        if cfg.distill_mse_weight > 0:
            student, teacher = getattr(task, "contrastive_dim", None), self.guide.model.representation_dim()
            if student is not None and student != teacher:
                if cfg.distill_mse_projection == "none":
                    raise ClearCriterionError(
                        f"--distill-mse-weight compares the {student}-dimensional contrastive vectors with "
                        f"--guide-model's {teacher}-dimensional ones and --distill-mse-projection is none; give the "
                        "student the guide's size (--projection-dim, or --projection-layers 0) or use "
                        "--distill-mse-projection linear")
                # EmbedDistill's learned map to the guide's size, here because the guide's size is known only
                # now: fairseq's optimizer trains the criterion's parameters with the model's, and its
                # checkpoints hold the criterion's state
                self.distill_projection = torch.nn.Linear(student, teacher)
        self.queue = MomentumQueue(cfg.queue_size, cfg.queue_momentum) if cfg.queue_size > 0 else None
        if self.queue is not None:
            # never trained: a parameter only so that fairseq's trainer saves and restores the
            # criterion's state (state_dict below), which holds the queue and the momentum encoder
            self.queue_state = torch.nn.Parameter(torch.zeros(0), requires_grad=False)
        self._momentum_held = []
        if cfg.sentence_mlm_weight > 0:
            dictionary = task.source_dictionary
            #: what --sentence-mlm-weight never masks: <s>, </s>, padding and augmentations' [DEL]
            self._unmaskable = [dictionary.bos(), dictionary.eos(), dictionary.pad()] + \
                [dictionary.indices[s] for s in ("[DEL]",) if s in dictionary.indices]
            self._mask_idx = dictionary.indices.get("<mask>")
            if self._mask_idx is None:
                raise ClearCriterionError("--sentence-mlm-weight masks tokens, but the dictionary has no <mask>")

    # ---- the momentum queue's state in fairseq's checkpoints -----------------------
    def state_dict(self, *args, **kwargs):
        state = super().state_dict(*args, **kwargs)
        if self.queue is not None:
            state.update(self.queue.state(kwargs.get("prefix", "") + "momentum_queue."))
        return state

    def load_state_dict(self, state_dict, strict=True, **kwargs):
        # fairseq's trainer hands a criterion with parameters the checkpoint's criterion entry, which
        # is None in a checkpoint of a run whose criterion held none (no queue, no distillation map)
        if state_dict is None:
            logger.info("the checkpoint holds no criterion state (its run had no --queue-size or distillation "
                        "map): the momentum queue and the map start fresh")
            return None
        queued = {k: v for k, v in state_dict.items() if k.startswith("momentum_queue.")}
        state_dict = {k: v for k, v in state_dict.items() if k not in queued}
        if queued and self.queue is None:
            logger.info("the checkpoint's momentum queue is not used: this run has no --queue-size")
        elif queued and scope.resetting_optimizer():
            # like the optimizer's moments, the momentum encoder and the queue are the earlier run's
            # training state: --reset-optimizer (and --finetune-from-model) start them from this model
            logger.info("--reset-optimizer: the momentum queue starts empty and its encoder from the model")
        elif queued:
            self.queue.restore(queued, "momentum_queue.")
        return super().load_state_dict(state_dict, strict=strict, **kwargs)

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
        return modules.cross_entropy(logits.view(-1, logits.size(-1)), target[masked].view(-1),
                                     reduction="sum", ignore_index=self.padding_idx)

    def _sentence_mlm(self, model, views):
        """InfoCSE's term: (summed cross-entropy, masked tokens) of the anchor views' tokens, masked at
        --sentence-mlm-prob and predicted by the model's decoder from each view's sentence vector."""
        if getattr(model, "sentence_decoder", None) is None:
            raise ClearCriterionError(SENTENCE_DECODER_MISSING)
        src = views["src_tokens"][: views["num_anchors"]]
        fixed = torch.isin(src, torch.tensor(self._unmaskable, device=src.device))
        masked = (torch.rand(src.shape, device=src.device) < self.cfg.sentence_mlm_prob) & ~fixed
        inputs = src.masked_fill(masked, self._mask_idx)
        rows, chunk = src.size(0), self.cfg.mlm_chunk_size
        if chunk <= 0 or rows <= chunk or not (model.training and torch.is_grad_enabled()):
            return self._sentence_mlm_rows(model, src, inputs, masked), masked.sum()
        from torch.utils.checkpoint import checkpoint

        # --mlm-chunk-size as _mlm: a chunk of anchors at a time, each recomputed in the backward pass (the
        # mask is drawn above, once; dropout is replayed)
        loss = None
        for start in range(0, rows, chunk):
            part = slice(start, start + chunk)
            piece = checkpoint(self._sentence_mlm_rows, model, src[part], inputs[part], masked[part],
                               use_reentrant=False)
            loss = piece if loss is None else loss + piece
        return loss, masked.sum()

    def _sentence_mlm_rows(self, model, src, inputs, masked):
        logits = model(src, sentence_mlm=(inputs, masked))[0]
        return modules.cross_entropy(logits.view(-1, logits.size(-1)), src[masked].view(-1), reduction="sum",
                                     ignore_index=self.padding_idx)

    # ---- contrastive -----------------------------------------------------------
    def _problem(self, model, views, step, n_masked):
        """(views of each micro-batch of the contrastive problem this call completes, its masked
        tokens, whether it spans held micro-batches); None while --accumulate-contrastive holds
        the update's earlier micro-batches (their loss comes at the last one)."""
        encode = lambda src: model(src, contrastive=True)[0]  # noqa: E731  (through forward: DDP)
        chunk = self.cfg.contrastive_chunk_size if model.training else 0
        stand_in = step is not None and step.stand_in
        guide = self.guide.vectors(views["src_tokens"], chunk) if self.guide is not None and model.training else None
        momentum = None
        if self.queue is not None and model.training and torch.is_grad_enabled():
            if step is None or step.index == 0:  # once per update, before its views are encoded
                self.queue.step(model)
            momentum = split_views(self.queue.encode(views["src_tokens"], chunk), views, stand_in)
        if not (self.cfg.accumulate_contrastive and step is not None and step.count is not None
                and model.training and torch.is_grad_enabled()):
            z = cached_encode(encode, views["src_tokens"], chunk, model.parameters())
            self._momentum_held = [momentum] if momentum is not None else []
            return [split_views(z, views, stand_in, guide)], int(n_masked), False
        if step.index == 0:
            self._held, self._momentum_held = [], []
        if momentum is not None:
            self._momentum_held.append(momentum)
        self._held.append((encode_without_graph(encode, views["src_tokens"], chunk), views, stand_in, int(n_masked),
                           guide))
        if step.index < step.count - 1:
            return None
        held, self._held = self._held, []
        # the backward encodes every held chunk again, with its graph (gradcache.attach)
        z = attach(encode, [piece for h in held for piece in h[0]], model.parameters())
        parts, offset = [], 0
        for pieces, layout, stand_in_i, _, guide_i in held:
            rows = sum(piece.out.size(0) for piece in pieces)
            parts.append(split_views(z[offset : offset + rows], layout, stand_in_i, guide_i))
            offset += rows
        return parts, sum(h[3] for h in held), True

    def _contrastive(self, parts, n_masked, training):
        """(summed loss over the local anchors, correct, local anchors, global anchors, global
        masked tokens, {rule: candidates masked}): the views of ``parts`` against every candidate
        (all ranks' when gathering)."""
        fields = [None if parts[0][k] is None else torch.cat([part[k] for part in parts])
                  for k in range(len(Part._fields))]
        za, zp, zh, signs, keys, hkeys, ga, gp, gh = fields
        n = za.size(0)
        offset, pairs, masked, sizes = 0, n, n_masked, None
        if self.gather and training:
            group = self._group()
            # the view counts and the masked tokens travel in one collective
            gathered = distributed.all_gather_counts([n, n_masked], group, za.device)
            sizes = gathered[:, 0].tolist()
            pairs, masked = gathered.sum(0).tolist()
            offset = sum(sizes[:torch.distributed.get_rank(group=group)])
            za, zp = (distributed.gather_with_grad(x, sizes, group) for x in (za, zp))
            if zh is not None:
                zh = distributed.gather_with_grad(zh, sizes, group)
            keys, hkeys, ga, gp, gh = (None if x is None else distributed.gather(x, sizes, group)
                                       for x in (keys, hkeys, ga, gp, gh))
        rows = torch.arange(offset, offset + n, device=za.device)
        guided = training and self.guide is not None and not self.cfg.no_guide_filter
        mask, counts = negatives.false_negatives(self.cfg, rows, keys, hkeys, (ga, gp, gh) if guided else None)
        distill = self._distillation(za, zp, zh, ga, gp, gh, rows) if training and self.distill else {}
        queue = self._queue_columns(keys, rows) if training and self.queue is not None else {}
        if "queue_mask" in queue:  # queued candidates masked as duplicates count with the in-batch ones
            counts["dup_masked"] += int(queue["queue_mask"].sum())
        form = self.cfg.loss_form
        if self.dims is not None and self.dims[0] > za.size(1):
            raise ClearCriterionError(f"--matryoshka-dims {self.cfg.matryoshka_dims}: the largest size is more "
                                      f"than the {za.size(1)} dimensions of the contrastive vectors")
        if form == "nt-xent":  # both directions: 2 anchors per pair
            cl_sum, correct = losses.nt_xent(za, zp, self.cfg.temperature, rows, signs, negative_mask=mask,
                                             dims=self.dims, dim_weights=self.dim_weights, **self.hardness, **queue)
            self._enqueue(training, sizes, gp if "kd_loss" in self.distill else None)
            return cl_sum, correct, 2 * n, 2 * pairs, masked, counts, distill
        cl_sum, correct = losses.simcse(za, zp, self.cfg.temperature, rows, zh, self.cfg.hard_negative_weight,
                                        signs, negative_mask=mask, dims=self.dims, dim_weights=self.dim_weights,
                                        **self.hardness, **queue)
        self._enqueue(training, sizes, gp if "kd_loss" in self.distill else None)
        return cl_sum, correct, n, pairs, masked, counts, distill

    def _queue_columns(self, keys, rows):
        """The loss's ``queue``/``queue_mask`` arguments: the queued vectors (before this problem's are
        added) and, with --mask-duplicates, those whose pair shares a text with the anchor's pair."""
        vectors = self.queue.vectors
        if vectors is None:
            return {}
        out = {"queue": vectors.to(rows.device)}
        if self.cfg.mask_duplicates and keys is not None and self.queue.keys is not None:
            # the pairs' texts against the queued pairs' (duplicate_mask's rule for in-batch pairs)
            shared = negatives._shared(keys[rows], self.queue.keys.to(rows.device))
            out["queue_mask"] = torch.cat([shared, shared]) if self.cfg.loss_form == "nt-xent" else shared
        return out

    def _enqueue(self, training, sizes, teacher):
        """Push the momentum encoder's vectors of this problem's positives (every rank's, in rank order),
        with ``teacher``, the guide's vectors of the same rows (already gathered), for --distill-weight."""
        held, self._momentum_held = self._momentum_held, []
        if not (training and self.queue is not None and held):
            return
        vectors = torch.cat([part.zp for part in held])
        keys = None if held[0].keys is None else torch.cat([part.keys for part in held])
        if sizes is not None:
            group = self._group()
            vectors = distributed.gather(vectors, sizes, group)
            keys = None if keys is None else distributed.gather(keys, sizes, group)
        self.queue.push(vectors, keys, teacher)

    def _distillation(self, za, zp, zh, ga, gp, gh, rows):
        """{term: its sum over the local anchors of the contrastive problem} for the terms in
        ``self.distill``: the KL over each anchor's candidates of its loss form (without itself and
        its positive, and the queue's rows, scored by the guide as it scored them when queued), the MSE of
        each anchor's vector (mapped by --distill-mse-projection's layer when the sizes differ) against the
        guide's."""
        m, local = za.size(0), torch.arange(len(rows), device=za.device)
        if self.cfg.loss_form == "nt-xent":  # both directions, candidates every view
            z, g = torch.cat([za, zp]), torch.cat([ga, gp])
            anchors, partners = torch.cat([rows, rows + m]), torch.cat([rows + m, rows])
            exclude = torch.zeros((len(anchors), 2 * m), dtype=torch.bool, device=za.device)
            both = torch.cat([local, local + len(rows)])
            exclude[both, anchors] = True
            exclude[both, partners] = True
            student, teacher, za_, ga_ = z, g, z[anchors], g[anchors]
        else:
            student = zp if zh is None else torch.cat([zp, zh])
            teacher = gp if gh is None else torch.cat([gp, gh])
            exclude = torch.zeros((len(rows), student.size(0)), dtype=torch.bool, device=za.device)
            exclude[local, rows] = True
            za_, ga_ = za[rows], ga[rows]
        out = {}
        queued = self.queue.teacher_columns() if self.queue is not None else None
        if queued is not None:  # constants: the momentum encoder's and the guide's vectors of past positives
            student, teacher = torch.cat([student, queued[0].to(student.dtype)]), torch.cat([teacher, queued[1]])
            exclude = torch.cat([exclude, exclude.new_zeros((exclude.size(0), queued[0].size(0)))], dim=1)
        if "kd_loss" in self.distill:
            out["kd_loss"] = losses.distillation_kl(za_, student, ga_, teacher, self.cfg.distill_temperature,
                                                    self.cfg.distill_teacher_temperature, exclude)
        if "kd_mse" in self.distill:
            projection = self.distill_projection
            student_vectors = za_ if projection is None else projection(za_.to(projection.weight.dtype))
            out["kd_mse"] = losses.embedding_mse(student_vectors, ga_)
        return out

    def forward(self, model, sample, reduce=True):
        step = getattr(self.task, "step", None)  # tasks/contrastive.Step; None outside train_step
        stand_in = step is not None and step.stand_in
        zero = torch.zeros((), device=_device_of(sample))
        mlm_sum, n_masked = zero, zero.long()
        if "target" in sample:
            mlm_sum, n_masked = self._mlm(model, sample["net_input"], sample["target"])
        if stand_in:  # its own terms count zero (the task passes fairseq no ignore_grad)
            mlm_sum, n_masked = mlm_sum * 0.0, n_masked * 0
        views = sample.get("contrastive") if self.cfg.cl_weight > 0 else None
        decoder = getattr(model, "sentence_decoder", None)
        if model.training and self.cfg.sentence_mlm_weight == 0 and decoder is not None:
            # nothing would train it (and DDP refuses parameters that get no gradient)
            raise ClearCriterionError("--sentence-mlm-layers builds a decoder that only --sentence-mlm-weight trains; "
                                      "give it a weight > 0 (InfoCSE: 1e-5) or leave out --sentence-mlm-layers")
        pairs = 0 if stand_in or not views else views["num_anchors"]
        own_anchors = 2 * pairs if self.cfg.loss_form == "nt-xent" else pairs
        # units of sample_size: masked tokens when the problem masks any, else anchors; an
        # --accumulate-contrastive update fixes them at its first micro-batch (the task's masking)
        masked_units = "target" in sample
        loss, logs, unit_global = mlm_sum.float(), {}, float(n_masked)
        problem = self._problem(model, views, step, n_masked) if views else None
        if problem is not None:
            parts, problem_masked, held = problem
            cl_sum, correct, anchors, anchors_global, masked, counts, distill = self._contrastive(
                parts, problem_masked, model.training)
            masked_units = masked_units if held else masked > 0
            # λ·L_CL + each distillation term's weight x its sum: all means over the anchors
            terms = self.cfg.cl_weight * cl_sum + sum(self.distill[k] * v for k, v in distill.items())
            loss = weighted_loss(loss, terms, 1.0, masked if masked_units else 0, anchors_global)
            unit_global = masked if masked_units else anchors_global
            logs = {"cl_loss": cl_sum.data, "cl_correct": correct.data, "cl_anchors": anchors, **counts,
                    **{k: v.data for k, v in distill.items()}}
        elif views:  # an earlier micro-batch of an --accumulate-contrastive update
            if not masked_units:  # a zero in the graph keeps optimizer.backward() valid without MLM
                trainable = next((p for p in model.parameters() if p.requires_grad), None)
                loss = trainable.sum() * 0.0 if trainable is not None else loss
            # the same keys in every micro-batch: fairseq's stat sync sums the first output's keys
            logs = {"cl_loss": zero, "cl_correct": zero.long(), "cl_anchors": 0,
                    **{k: 0 for k in self._mask_counters()}}
            if model.training:
                logs.update({k: zero for k in self.distill})
        sample_size = n_masked.float() if masked_units or not views else zero + own_anchors
        if views and self.cfg.sentence_mlm_weight > 0:
            # its own mean over its masked tokens, weighed by this call's sample_size (fairseq divides by their sum)
            smlm_sum, n_smlm = self._sentence_mlm(model, views)
            if stand_in:
                smlm_sum, n_smlm = smlm_sum * 0.0, n_smlm * 0
            loss = loss + self.cfg.sentence_mlm_weight * smlm_sum.float() * (sample_size / max(int(n_smlm), 1))
            logs.update(smlm_loss=smlm_sum.data, n_smlm=n_smlm.data)
        if "target2" in sample:  # Double-MLM baseline (§5.1): its own mean over its masked tokens
            mlm2_sum, n_masked2 = self._mlm(model, sample["net_input2"], sample["target2"])
            loss = loss + mlm2_sum.float() * (unit_global / max(int(n_masked2), 1))
            logs.update(mlm2_loss=mlm2_sum.data, n_masked2=n_masked2.data)
        if stand_in:
            loss = loss * 0.0
        logs.update(loss=loss.data, mlm_loss=mlm_sum.data, n_masked=n_masked.data, ntokens=sample["ntokens"],
                    nsentences=sample["nsentences"], sample_size=sample_size)
        return loss, sample_size, logs

    def _mask_counters(self):
        return negatives.counters(self.cfg, self.guide is not None and not self.cfg.no_guide_filter)

    def _group(self):
        from fairseq.distributed import utils as dist_utils

        return dist_utils.get_data_parallel_group()

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(float(log.get(key, 0)) for log in logging_outputs)

        sample_size, n_masked, n_masked2, anchors, n_smlm = (
            total(k) for k in ("sample_size", "n_masked", "n_masked2", "cl_anchors", "n_smlm"))
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1e-8) / math.log(2), sample_size, round=3)
        if n_masked > 0:
            metrics.log_scalar("mlm_loss", total("mlm_loss") / n_masked / math.log(2), n_masked, round=3)
            metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["mlm_loss"].avg))
        if n_masked2 > 0:
            metrics.log_scalar("mlm2_loss", total("mlm2_loss") / n_masked2 / math.log(2), n_masked2, round=3)
        if n_smlm > 0:
            metrics.log_scalar("smlm_loss", total("smlm_loss") / n_smlm / math.log(2), n_smlm, round=3)
        if anchors > 0:
            metrics.log_scalar("cl_loss", total("cl_loss") / anchors / math.log(2), anchors, round=3)
            metrics.log_scalar("cl_acc", 100.0 * total("cl_correct") / anchors, anchors, round=2)
            # --distill-weight's KL in bits (as the losses), --distill-mse-weight's error: per anchor
            for key, unit in (("kd_loss", math.log(2)), ("kd_mse", 1.0)):
                if any(key in log for log in logging_outputs):
                    metrics.log_scalar(key, total(key) / anchors / unit, anchors, round=4)
        for key in ("dup_masked", "guide_masked"):  # candidates masked per update (all ranks)
            if any(key in log for log in logging_outputs):
                metrics.log_scalar(key, total(key), round=1)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
