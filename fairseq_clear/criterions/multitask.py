"""``--criterion multitask``: seed 004's three task losses, their average, and the contrastive term.

For each task part of a batch (``sample["multitask"][task]``, see data/multitask_dataset.py):

* sentiment: cross-entropy of the sentiment head's class logits;
* paraphrase: binary cross-entropy of the bilinear logit against the 0/1 label;
* sts: mean squared error between the STS head's cosine and the score / 5. The seed does not
  state its STS loss; its STS head is a cosine (§4.2) and it cites Sentence-BERT's
  cosine-similarity fine-tuning (§3), whose loss is this one (CosineSimilarityLoss: MSE of the
  cosine against the gold score scaled to [0, 1]).

Each is the mean over the batch's rows; an update's loss is the plain mean of the task losses
it holds (the multi-task *average* loss of §4.2; one task in a round-robin update). A
``contrastive`` part (fusion and the sequential schedules) adds SimCSE's loss (seed eq. 1,
τ = ``--temperature``, 0.05) over its sentences, each the positive of itself through dropout,
mean over the anchors. ``sample_size`` is 1: the loss is already a mean.

Logged per task: its loss, and on every split its metric (sentiment and paraphrase accuracy;
the STS head's Pearson correlation from summed moments), and ``overall``, the plain mean of the
metrics of the tasks trained (with all three: the seed's Overall).
"""

import math
from dataclasses import dataclass, field
import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass

from .. import losses as contrastive_losses
from ..errors import FairseqClearError
from ..fairseq_fixes import scope
from ..models.multitask_heads import TASK_NAMES

#: the seed's metric of each task, as logged
METRIC = {"sentiment": "sentiment_acc", "paraphrase": "paraphrase_acc", "sts": "sts_pearson"}


class MultitaskCriterionError(FairseqClearError, ValueError):
    """The criterion's options or task do not fit; the message names the option."""


@dataclass
class MultitaskCriterionConfig(FairseqDataclass):
    # fairseq's generation config shares --temperature and cannot take None: NaN = not given
    temperature: float = field(
        default=float("nan"),
        metadata={"help": "τ of the contrastive (SimCSE) term of fusion and the sequential schedules (default: "
                  "seed 004 §5.3's 0.05)"},
    )
    contrastive_weight: float = field(
        default=1.0,
        metadata={"help": "weight of the contrastive term when a batch also holds task parts (the schedules "
                  "never mix them: fusion's contrastive update is its own; seed: 1)"},
    )


def task_loss(name: str, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean loss of task ``name`` for the head's ``output`` and the batch's labels."""
    if name == "sentiment":
        return F.cross_entropy(output.float(), target, reduction="mean")
    if name == "paraphrase":
        return F.binary_cross_entropy_with_logits(output.float(), target.float(), reduction="mean")
    if name == "sts":
        return F.mse_loss(output.float(), target.float() / 5.0, reduction="mean")
    raise KeyError(name)


def prediction(name: str, output: torch.Tensor) -> torch.Tensor:
    """The head's prediction: a class (sentiment), 0/1 (paraphrase: logit > 0), a score in [0, 5]
    (STS: 5 × the cosine, on the labels' scale)."""
    if name == "sentiment":
        return output.argmax(-1)
    if name == "paraphrase":
        return (output > 0).long()
    return 5.0 * output.float()


@register_criterion("multitask", dataclass=MultitaskCriterionConfig)
class MultitaskCriterion(FairseqCriterion):
    """Seed 004's task losses (sentiment, paraphrase, STS), averaged, and fusion's contrastive term."""

    def __init__(self, cfg: MultitaskCriterionConfig, task):
        super().__init__(task)
        scope.component_built(cfg, "criterion multitask")  # inside a fairseq command: the run is ours
        if getattr(task, "name", None) != "multitask":
            raise MultitaskCriterionError("--criterion multitask needs --task multitask")
        if not 0 < cfg.temperature < math.inf:
            raise MultitaskCriterionError(f"--temperature must be > 0 (seed 004: 0.05), got {cfg.temperature}")
        if cfg.contrastive_weight < 0:
            raise MultitaskCriterionError(f"--contrastive-weight must be >= 0, got {cfg.contrastive_weight}")
        self.cfg = cfg

    def task_losses(self, model, sample):
        """({part: mean loss} for each task part and the contrastive part of ``sample``, logs)."""
        out, logs = {}, {}
        for name, part in sample.get("multitask", {}).items():
            output = model(part["src_tokens"], multitask_head=name)[0]
            target = part["target"]
            loss = task_loss(name, output, target)
            out[name] = loss
            n = target.size(0)
            logs[f"{name}_loss"] = loss.detach() * n
            logs[f"{name}_n"] = n
            pred = prediction(name, output.detach())
            if name == "sts":
                x, y = output.detach().double(), target.double()
                logs.update(sts_x=x.sum(), sts_y=y.sum(), sts_xx=(x * x).sum(), sts_yy=(y * y).sum(),
                            sts_xy=(x * y).sum())
            else:
                logs[f"{name}_correct"] = (pred == target.long()).sum()
        views = sample.get("contrastive")
        if views:
            z = model(views["src_tokens"], contrastive=True)[0]
            n = views["num_anchors"]
            cl_sum, correct = contrastive_losses.simcse(z[:n], z[n:2 * n], self.cfg.temperature)
            out["contrastive"] = cl_sum / max(n, 1)
            logs.update(cl_loss=cl_sum.detach(), cl_correct=correct.detach(), cl_anchors=n)
        return out, logs

    def forward(self, model, sample, reduce=True):
        parts, logs = self.task_losses(model, sample)
        supervised = [v for k, v in parts.items() if k != "contrastive"]
        loss = torch.stack(supervised).mean() if supervised else None
        if "contrastive" in parts:
            term = parts["contrastive"] * (self.cfg.contrastive_weight if supervised else 1.0)
            loss = term if loss is None else loss + term
        if loss is None:
            raise MultitaskCriterionError("a batch with neither task parts nor a contrastive part")
        logs.update(loss=loss.detach(), sample_size=1, nsentences=sample.get("nsentences", 0),
                    ntokens=sample.get("ntokens", 0))
        return loss, 1, logs

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(float(log.get(key, 0)) for log in logging_outputs)

        sample_size = total("sample_size")
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1e-8), sample_size, round=4)
        present = []
        for name in TASK_NAMES:
            n = total(f"{name}_n")
            if n <= 0:
                continue
            present.append(name)
            metrics.log_scalar(f"{name}_loss", total(f"{name}_loss") / n, n, round=4)
            if name == "sts":
                for key in ("x", "y", "xx", "yy", "xy"):
                    metrics.log_scalar_sum(f"_sts_{key}", total(f"sts_{key}"))
                metrics.log_scalar_sum("_sts_n", n)
                metrics.log_derived("sts_pearson", _pearson)
            else:
                metrics.log_scalar_sum(f"_{name}_correct", total(f"{name}_correct"))
                metrics.log_scalar_sum(f"_{name}_n", n)
                metrics.log_derived(METRIC[name], _accuracy(name))
        if present:  # derived over the whole aggregate: a validation's batches hold one task each
            metrics.log_derived("overall", _overall)
        anchors = total("cl_anchors")
        if anchors > 0:
            metrics.log_scalar("cl_loss", total("cl_loss") / anchors, anchors, round=4)
            metrics.log_scalar("cl_acc", 100.0 * total("cl_correct") / anchors, anchors, round=2)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True


def _accuracy(name):
    def derived(meters):
        n = meters[f"_{name}_n"].sum
        return round(meters[f"_{name}_correct"].sum / n, 4) if n > 0 else float("nan")
    return derived


def pearson_from_moments(n, sx, sy, sxx, syy, sxy) -> float:
    """Pearson's r from summed moments (NaN when either side is constant)."""
    cov = n * sxy - sx * sy
    var = (n * sxx - sx * sx) * (n * syy - sy * sy)
    return cov / math.sqrt(var) if var > 0 else float("nan")


def _pearson(meters):
    keys = ("n", "x", "y", "xx", "yy", "xy")
    if any(f"_sts_{k}" not in meters for k in keys):
        return float("nan")
    return round(pearson_from_moments(*(meters[f"_sts_{k}"].sum for k in keys)), 4)


def _overall(meters):
    """The plain mean of the task metrics logged so far (all three: the seed's Overall)."""
    values = []
    for name in TASK_NAMES:
        if name == "sts" and "_sts_n" in meters:
            values.append(_pearson(meters))
        elif name != "sts" and f"_{name}_n" in meters:
            values.append(_accuracy(name)(meters))
    return round(sum(values) / len(values), 4) if values else float("nan")
