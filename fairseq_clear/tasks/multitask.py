"""Task ``multitask``: seed 004's sentiment, paraphrase and STS heads trained on one encoder.

The data directory is ``clear-prepare-multitask``'s output (GLUE SST-2, MRPC or QQP, STS-B, or
the CS224N default project's ``ids-sst-*``, ``quora-*``, ``sts-*`` CSVs), tokenised with the
model's own tokenizer::

    DATA/dict.txt, DATA/<tokenizer files>, DATA/multitask.json
    DATA/sentiment/input0/{train,valid[,test]}.{bin,idx}     DATA/sentiment/label/SPLIT.label
    DATA/paraphrase/input0/..., DATA/paraphrase/input1/...   DATA/paraphrase/label/SPLIT.label
    DATA/sts/input0/..., DATA/sts/input1/...                 DATA/sts/label/SPLIT.label (0-5)

What an epoch trains is ``--schedule`` (data/multitask_dataset.py has the plan of each):
the multi-task average of the seed's final model, round robin by batch or by epoch, fusion
(the supervised update on a batch, then the contrastive one on the same batch), the
sequential supervised-first / contrastive-first, and contrastive (no head: the recipe's
SimCSE-unsup pre-training phase). ``--tasks`` are the supervised heads, ``--contrastive-tasks``
the datasets whose sentences the contrastive updates read: Table 1's configuration is
``--tasks sentiment --contrastive-tasks sentiment,paraphrase,sts``. ``--pcgrad`` combines the tasks' gradients of
an average update by gradient surgery (fairseq_clear/pcgrad.py). The heads
(models/multitask_heads.py) are named classification heads of the model, built here where
fairseq builds the model, and saved with the checkpoint. The contrastive objective is
SimCSE's on [CLS] through the 2-layer projection head (§4.1), built only when the schedule
has contrastive updates and dropped when a checkpoint is loaded without them.

The losses are ``--criterion multitask`` (criterions/multitask.py). Validation logs each
task's metric and ``overall`` (their plain mean, the seed's Overall): pass
``--best-checkpoint-metric overall --maximize-best-checkpoint-metric`` to keep the best dev
model, as the seed does.
"""

import json
import logging
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from fairseq.data import iterators
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task

from .. import paper_defaults
from ..checkpoint_sizes import CEILINGS
from ..data import MultitaskDataset, SentenceDataset, TaskRows
from ..data.multitask_dataset import CONTRASTIVE_SCHEDULES, DOWNSAMPLE_CHOICES, SCHEDULES
from ..models.multitask_heads import PAIR_TASKS, SHARING_CHOICES, TASK_NAMES
from .contrastive import NOT_HONOURED, ContrastiveConfig, ContrastiveTask, TaskConfigError, data_paths

logger = logging.getLogger(__name__)

META = "multitask.json"
#: far above any sentiment scale (SST-2: 2, SST-5 and the CS224N SST: 5), far below a head that
#: would not fit memory
MAX_SENTIMENT_CLASSES = 1000


@dataclass
class MultitaskConfig(ContrastiveConfig):
    tasks: str = field(
        default="sentiment,paraphrase,sts",
        metadata={"help": "comma-separated tasks to train, each a head and a subdirectory of DATA: sentiment, "
                  "paraphrase, sts (seed 004: all three; one task = the seed's single-task fine-tuning, "
                  "Table 2's 'Single Task' rows)"},
    )
    schedule: ChoiceEnum(SCHEDULES) = field(
        default="average",
        metadata={"help": "how the objectives combine (seed 004 §4.2): average = one batch of every task per "
                  "update, the mean of their losses (the seed's final model); round-robin-batch = one task's "
                  "batch per update, the tasks in turn; round-robin-epoch = every batch of one task, then the "
                  "next (Table 6); fusion = the average update on a batch, then SimCSE's contrastive update on "
                  "the same batch of --fusion-task (Table 1's best); supervised-first / contrastive-first = "
                  "--first-phase-epochs epochs of one, then the other (Table 1); contrastive = contrastive epochs "
                  "only, no head (examples/multitask/run.sh's SimCSE-unsup phase of §4.1's pre-training)"},
    )
    contrastive_tasks: str = field(
        default="",
        metadata={"help": "comma-separated tasks whose sentences the contrastive updates read (SimCSE-unsup: each "
                  "sentence its own positive through dropout), one task after the other; empty = the schedule's "
                  "own: --tasks (fusion: --fusion-task alone). Table 1's configuration (seed 004 §4.2, §5.3: only "
                  "sentiment supervised, 'first SST data, then Quora data, and finally SemEval STS data'): "
                  "--tasks sentiment --contrastive-tasks sentiment,paraphrase,sts; with fusion the other tasks' "
                  "contrastive batches follow the epoch's fused updates"},
    )
    downsample: ChoiceEnum(DOWNSAMPLE_CHOICES) = field(
        default="smallest",
        metadata={"help": "rows per task and epoch: smallest = as many as the smallest task has, drawn afresh "
                  "each epoch (seed 004 §4.2: SST and Quora down-sampled to the STS dataset's length); "
                  "none = every row (a task with fewer batches restarts in average updates)"},
    )
    fusion_task: ChoiceEnum(TASK_NAMES) = field(
        default="sts",
        metadata={"help": "--schedule fusion: the task whose batch is trained again against the contrastive "
                  "objective (seed 004 §4.2: 'the same batch of STS data is trained first against the "
                  "classification objective (Cross Entropy Loss), and then against the contrastive "
                  "objective'; the text also calls its sentiment supervision 'on the STS dataset', so "
                  "'sentiment' is the other reading, and Table 1's, whose one head is sentiment)"},
    )
    first_phase_epochs: int = field(
        default=0,
        metadata={"help": "--schedule supervised-first / contrastive-first: epochs of the first phase; the "
                  "rest of --max-epoch is the second (the seed gives no value: required with those schedules)"},
    )
    pcgrad: bool = field(
        default=False,
        metadata={"help": "gradient surgery (PCGrad, Yu et al. 2020) on the tasks' gradients of each average "
                  "update, conflicting components projected out, then merged as WeiChengTseng/Pytorch-PCGrad "
                  "merges them: averaged on the parameters every task reaches, summed on the others (the "
                  "heads) (seed 004 Table 7; off in the seed's final model). fp32 and one process only"},
    )
    head_hidden_dim: int = field(
        default=768,
        metadata={"help": "hidden size of each task head's 2-layer MLP (seed 004 §5.3: 768)",
                  "bounds": (1, CEILINGS["projection_hidden_dim"])},
    )
    head_dropout: float = field(
        default=0.3,
        metadata={"help": "dropout before each linear layer of the task heads (seed 004 §5.3: 0.3)",
                  "bounds": (0.0, 1.0)},
    )
    head_sharing: ChoiceEnum(SHARING_CHOICES) = field(
        default="first-layer",
        metadata={"help": "what the paraphrase and STS heads share (seed 004 §4.2, Table 3): first-layer = the "
                  "first linear layer (the seed's choice), none = all different, all = the whole MLP (the "
                  "paraphrase head's bilinear weights stay its own)"},
    )
    num_sentiment_classes: int = field(
        default=0,
        metadata={"help": "classes of the sentiment head; 0 = DATA/multitask.json's (SST-2: 2; the CS224N "
                  "SST: 5)", "bounds": (0, MAX_SENTIMENT_CLASSES)},
    )


def parse_tasks(text: str, option: str = "--tasks"):
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    bad = [t for t in names if t not in TASK_NAMES]
    if not names or bad or len(set(names)) != len(names):
        raise TaskConfigError(
            f"{option} must name each of {', '.join(TASK_NAMES)} at most once, comma-separated; got '{text}'")
    return [t for t in TASK_NAMES if t in names]  # the seed's order (§5.3: SST, then Quora, then STS)


def head_tasks(tasks: str, schedule: str):
    """The tasks with a head (supervised): ``--tasks``; none with ``--schedule contrastive``."""
    return [] if schedule == "contrastive" else parse_tasks(tasks)


def contrastive_tasks(cfg, heads):
    """The tasks whose sentences the schedule's contrastive updates read: ``--contrastive-tasks``, or the
    schedule's own (the heads' tasks; fusion: its task; none for the supervised schedules)."""
    if not cfg.contrastive_tasks:
        if cfg.schedule == "contrastive":
            return parse_tasks(cfg.tasks)
        if cfg.schedule == "fusion":
            return [str(cfg.fusion_task)]
        return list(heads) if cfg.schedule in ("supervised-first", "contrastive-first") else []
    if cfg.schedule not in CONTRASTIVE_SCHEDULES:
        raise TaskConfigError(f"--contrastive-tasks {cfg.contrastive_tasks}: --schedule {cfg.schedule} has no "
                              f"contrastive updates (those that have: {', '.join(CONTRASTIVE_SCHEDULES)})")
    return parse_tasks(cfg.contrastive_tasks, "--contrastive-tasks")


def read_labels(path: str, task: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise TaskConfigError(f"labels '{path}' not found: build DATA with clear-prepare-multitask")
    values = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            text = line.strip()
            try:
                value = float(text)
            except ValueError:
                raise TaskConfigError(f"{path}:{lineno}: label '{text}' is not a number") from None
            if task == "sentiment" and (value < 0 or value != int(value)):
                raise TaskConfigError(f"{path}:{lineno}: sentiment label '{text}' is not a class index")
            if task == "paraphrase" and value not in (0.0, 1.0):
                raise TaskConfigError(f"{path}:{lineno}: paraphrase label '{text}' is not 0 or 1")
            if task == "sts" and not 0.0 <= value <= 5.0:
                raise TaskConfigError(f"{path}:{lineno}: STS score '{text}' is outside [0, 5]")
            values.append(value)
    return np.asarray(values, dtype=np.float64)


def read_meta(data: str) -> dict:
    """DATA/multitask.json, clear-prepare-multitask's record, checked ({} when there is none)."""
    from ..export.output_dir import MANIFEST, interrupted
    from ..preprocessing.multitask import SENTIMENT_CLASSES, WRITER

    directory = data_paths(data)[0]
    path = os.path.join(directory, META)
    if interrupted(directory):  # each file whole, but some of the previous run's
        raise TaskConfigError(f"{directory}: {WRITER} was stopped while replacing its files (its {MANIFEST} "
                              "still lists them as pending); run it again")
    if not os.path.isfile(path):
        return {}
    try:
        if os.path.getsize(path) > 1 << 20:
            raise ValueError("over 1 MiB")
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError, RecursionError) as e:  # not UTF-8, not JSON: ValueErrors
        raise TaskConfigError(f"{path}: not {WRITER}'s JSON record ({type(e).__name__}: {e}); rebuild DATA "
                              "with it") from None
    tasks = meta.get("tasks", {}) if isinstance(meta, dict) else None
    if not isinstance(tasks, dict) or not all(isinstance(entry, dict) for entry in tasks.values()):
        raise TaskConfigError(f"{path}: not {WRITER}'s record (its 'tasks' is not an object of task objects); "
                              "rebuild DATA with it")
    n = tasks.get("sentiment", {}).get("num_classes")
    ceiling = max(SENTIMENT_CLASSES.values())  # the most any source's labels allow
    if n is not None and (type(n) is not int or not 2 <= n <= ceiling):
        raise TaskConfigError(f"{path}: the sentiment class count {repr(n)[:40]} is not an integer in 2..{ceiling} "
                              f"(what {WRITER} writes); rebuild DATA with it, or pass --num-sentiment-classes")
    return meta


@register_task("multitask", dataclass=MultitaskConfig)
class MultitaskTask(ContrastiveTask):
    """Sentiment, paraphrase and STS heads on one encoder, with seed 004's schedules."""

    cfg: MultitaskConfig
    #: for docs/options.md: what its recipe passes of fairseq's own options
    options_note = ("its own `--tokens-per-sample` as above, no masked LM; fairseq's `--lr 1e-05 --batch-size 16 "
                    "--max-epoch 10` are the seed's §5.3 values, passed by examples/multitask/run.sh")
    name = "multitask"
    config_class = MultitaskConfig
    paper = "multitask"
    #: masked LM, MLM-only baselines and the batching policy are the other tasks' (the plan here
    #: is the schedule's)
    not_honoured = NOT_HONOURED + ("sample_break_mode", "mlm_only", "batch_composition")

    @classmethod
    def model_card_training(cls, task_cfg, model_args) -> str:
        return (f"seed 004 multi-task fine-tuning ({task_cfg.get('schedule', 'average')}) of sentiment, "
                "paraphrase and STS heads")

    def __init__(self, cfg: MultitaskConfig, dictionary=None):
        self.task_names = head_tasks(cfg.tasks, cfg.schedule)  # the heads
        self.contrastive_names = contrastive_tasks(cfg, self.task_names)
        # the tasks whose rows training reads, in the seed's order
        self.data_names = [t for t in TASK_NAMES if t in self.task_names or t in self.contrastive_names]
        if cfg.mlm == "on":
            raise TaskConfigError("--mlm on is not used by --task multitask (seed 004 trains no masked LM)")
        if cfg.schedule == "fusion" and cfg.fusion_task not in self.task_names:
            raise TaskConfigError(f"--fusion-task {cfg.fusion_task} is not one of --tasks {cfg.tasks}")
        if cfg.schedule in ("supervised-first", "contrastive-first") and cfg.first_phase_epochs < 1:
            raise TaskConfigError(f"--schedule {cfg.schedule} needs --first-phase-epochs >= 1 (the epochs of its first "
                                  f"phase), got {cfg.first_phase_epochs}")
        if cfg.pcgrad and (cfg.schedule != "average" or len(self.task_names) < 2):
            raise TaskConfigError("--pcgrad combines the tasks of an average update: it needs --schedule average "
                                  f"and at least two --tasks (got --schedule {cfg.schedule}, --tasks {cfg.tasks})")
        super().__init__(cfg, dictionary)
        self.num_classes = self._num_classes(cfg)
        logger.info("multitask: heads %s; contrastive on %s (schedule %s, downsample %s)%s",
                    ", ".join(self.task_names) or "none", ", ".join(self.contrastive_names) or "none", cfg.schedule,
                    cfg.downsample, ", PCGrad" if cfg.pcgrad else "")

    def _num_classes(self, cfg) -> int:
        if "sentiment" not in self.task_names:
            return 0
        if cfg.num_sentiment_classes:
            if cfg.num_sentiment_classes < 2:
                raise TaskConfigError(f"--num-sentiment-classes must be >= 2, got {cfg.num_sentiment_classes}")
            return cfg.num_sentiment_classes
        n = read_meta(cfg.data).get("tasks", {}).get("sentiment", {}).get("num_classes")
        meta = os.path.join(data_paths(cfg.data)[0], META)
        if not n:
            raise TaskConfigError(f"no sentiment class count in {meta}: build DATA with clear-prepare-multitask or "
                                  "pass --num-sentiment-classes")
        return n  # read_meta checked it

    @property
    def is_contrastive(self) -> bool:
        return self.cfg.schedule in CONTRASTIVE_SCHEDULES

    @classmethod
    def built_head_shapes(cls, task_cfg, input_dim: int, weights: dict):
        """``({state-dict name: shape}, parameters)`` of the heads :meth:`build_model` adds for a
        checkpoint's ``task_cfg``, built on the meta device (nothing allocated), for
        ``checkpoint_sizes`` to compare with the weights before the model is built. Without
        --num-sentiment-classes the class count is the weights' own (or the smallest, 2)."""
        from torch import nn

        from ..models.multitask_heads import build_heads

        get = (lambda k, d=None: task_cfg.get(k, d)) if hasattr(task_cfg, "get") else \
            (lambda k, d=None: getattr(task_cfg, k, d))
        names = head_tasks(get("tasks", ",".join(TASK_NAMES)), get("schedule", "average"))
        if not names:
            return {}, 0
        classes = get("num_sentiment_classes", 0)
        if not classes:
            out = weights.get("classification_heads.sentiment.out_proj.weight")
            classes = int(out.shape[0]) if hasattr(out, "shape") and len(out.shape) == 2 else 2
        with torch.device("meta"):
            heads = build_heads(input_dim, get("head_hidden_dim", 768), classes, get("head_dropout", 0.0),
                                get("head_sharing", "first-layer"), tasks=names)
        shapes = {f"classification_heads.{name}.{key}": tuple(t.shape)
                  for name, head in heads.items() for key, t in head.state_dict(keep_vars=True).items()}
        return shapes, sum(p.numel() for p in nn.ModuleDict(heads).parameters())

    # ---- where fairseq builds the model and the criterion
    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if not hasattr(model, "register_multitask_heads"):
            raise TaskConfigError(f"--task multitask needs a clear_roberta model (--arch clear_roberta_*), got {type(model).__name__}")
        if self.task_names:  # --schedule contrastive: no head
            model.register_multitask_heads(self.num_classes, self.cfg.head_hidden_dim, self.cfg.head_dropout,
                                           self.cfg.head_sharing, self.task_names)
        return model

    def build_criterion(self, cfg, from_checkpoint=False):
        from fairseq.tasks import FairseqTask

        if getattr(cfg, "_name", None) != "multitask":
            raise TaskConfigError(f"--task multitask trains with --criterion multitask, got --criterion {cfg._name}")
        paper_defaults.fill(cfg, {"temperature": paper_defaults.CRITERION_OPTIONS["temperature"]}, "multitask",
                            "criterion")
        return FairseqTask.build_criterion(self, cfg, from_checkpoint)

    # ---- data
    def load_task_rows(self, name: str, split: str, combine=False) -> TaskRows:
        root = os.path.join(data_paths(self.cfg.data)[0], name)
        columns = ["input0", "input1"] if name in PAIR_TASKS else ["input0"]
        sentences = []
        for column in columns:
            path = os.path.join(root, column, split)
            lines = self.load_lines(path, combine, missing=(
                f"split '{split}' of task '{name}' not found: no {path}.bin/.idx (build DATA with "
                "clear-prepare-multitask, or pass --disable-validation)"))
            data = SentenceDataset(lines, max_body_len=self.cfg.tokens_per_sample - 2,
                                   bos=self.source_dictionary.bos(), eos=self.source_dictionary.eos(),
                                   name=f"{split}/{name}/{column} ({path})")
            if data.num_empty:
                raise TaskConfigError(f"{path} has {data.num_empty} empty lines, so its rows no longer line up with "
                                      "the labels; rebuild DATA with clear-prepare-multitask")
            sentences.append(data)
        labels = read_labels(os.path.join(root, "label", f"{split}.label"), name)
        for column, data in zip(columns, sentences):
            if len(data) != len(labels):
                raise TaskConfigError(f"{os.path.join(root, column, split)}: {len(data)} rows for {len(labels)} labels "
                                      f"in {os.path.join(root, 'label', split + '.label')}; rebuild DATA")
        if name == "sentiment" and self.num_classes and len(labels) and labels.max() >= self.num_classes:
            raise TaskConfigError(f"{os.path.join(root, 'label', split + '.label')}: class {int(labels.max())} with "
                                  f"--num-sentiment-classes {self.num_classes}")
        return TaskRows(name, sentences, labels)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        train = split == "train"  # fairseq-train's --train-subset; every other split is validated in order
        names = self.data_names if train else self.task_names  # validation scores the heads only
        if not names:
            raise TaskConfigError(f"split '{split}': --schedule contrastive trains no head, so there is nothing to "
                                  "validate; pass --disable-validation")
        tasks = {name: self.load_task_rows(name, split, combine) for name in names}
        self.datasets[split] = MultitaskDataset(
            tasks, self.source_dictionary.pad(), schedule=self.cfg.schedule, downsample=self.cfg.downsample,
            seed=self.cfg.seed, fusion_task=self.cfg.fusion_task, first_phase_epochs=self.cfg.first_phase_epochs,
            train=train, supervised=self.task_names, contrastive=self.contrastive_names)
        return self.datasets[split]

    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None, max_positions=None,
                           ignore_invalid_inputs=False, required_batch_size_multiple=1, seed=1, num_shards=1,
                           shard_id=0, num_workers=0, epoch=1, data_buffer_size=0, disable_iterator_cache=False,
                           skip_remainder_batch=False, grouped_shuffling=False, update_epoch_batch_itr=False, **kwargs):
        """fairseq's EpochBatchIterator over the schedule's plan (shuffling off: the order is the schedule)."""
        if not isinstance(dataset, MultitaskDataset):
            return super().get_batch_iterator(
                dataset, max_tokens=max_tokens, max_sentences=max_sentences, max_positions=max_positions,
                ignore_invalid_inputs=ignore_invalid_inputs, required_batch_size_multiple=required_batch_size_multiple,
                seed=seed, num_shards=num_shards, shard_id=shard_id, num_workers=num_workers, epoch=epoch,
                data_buffer_size=data_buffer_size, disable_iterator_cache=disable_iterator_cache)
        if not max_sentences:
            raise TaskConfigError("--task multitask needs --batch-size (rows of each task per batch; seed 004 §5.3: 16)")
        if num_shards > 1 and dataset.train and self.cfg.schedule != "average":
            raise TaskConfigError(f"--schedule {self.cfg.schedule} orders the updates of one process; with several "
                                  "processes use --schedule average")
        dataset.set_epoch(epoch)
        batch_size = int(max_sentences)
        return iterators.EpochBatchIterator(
            dataset=dataset, collate_fn=dataset.collater,
            batch_sampler=lambda ds, ep: ds.batches(ep, batch_size),
            seed=seed, num_shards=num_shards, shard_id=shard_id, num_workers=num_workers, epoch=epoch,
            buffer_size=data_buffer_size, disable_shuffling=True, skip_remainder_batch=skip_remainder_batch,
            reuse_dataloader=False, persistent_workers=False,
        )

    # ---- PCGrad
    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        parts = sample.get("multitask", {}) if isinstance(sample, dict) else {}
        if not self.cfg.pcgrad or len(parts) < 2:
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        from fairseq.optim.fp16_optimizer import _FP16OptimizerMixin, _MemoryEfficientFP16OptimizerMixin

        from ..pcgrad import project_conflicting

        if isinstance(optimizer, (_FP16OptimizerMixin, _MemoryEfficientFP16OptimizerMixin)):
            raise TaskConfigError("--pcgrad writes the projected gradient itself: train in fp32 (leave out --fp16/--bf16)")
        if torch.distributed.is_available() and torch.distributed.is_initialized() \
                and torch.distributed.get_world_size() > 1:
            raise TaskConfigError("--pcgrad runs in one process (its gradients bypass DDP's synchronisation)")
        model.train()
        model.set_num_updates(update_num)
        losses, logging_output = criterion.task_losses(model, sample)
        params = [p for p in model.parameters() if p.requires_grad]
        flat, reached = [], []
        for loss in losses.values():
            grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
            flat.append(torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                                   for g, p in zip(grads, params)]))
            # the parameters this loss reaches (the reference's p.grad is not None): averaged where
            # every task's does, summed elsewhere (the heads)
            reached.append(torch.cat([torch.full((p.numel(),), g is not None, dtype=torch.bool, device=p.device)
                                      for g, p in zip(grads, params)]))
        generator = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + update_num)
        merged = project_conflicting(flat, generator, reached=reached) * (0.0 if ignore_grad else 1.0)
        offset = 0
        for p in params:
            g = merged[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
            p.grad = g.clone() if p.grad is None else p.grad + g
        loss = torch.stack(list(losses.values())).mean().detach()
        return loss, 1, logging_output
