"""Seed 004's three task datasets as one fairseq dataset, with the schedule as the batch plan.

Every item is one row of one task in one *phase*: supervised (the task's head and label) or
contrastive (SimCSE-unsupervised: the row's sentences, each its own positive through dropout).
An index encodes both: ``phase * total + offset[task] + row``. What an epoch trains, and in
which order, is the list of batches :meth:`MultitaskDataset.batches` returns for it (fairseq's
``EpochBatchIterator`` calls it once per epoch, with shuffling off: the order *is* the
schedule, seed 004 §4.2):

========================= ==================================================================
schedule                  the updates of an epoch
========================= ==================================================================
``average``               batch k of every task in one update; the loss is their mean
``round-robin-batch``     batch k of task 1, then of task 2, then of task 3, then k+1 ...
``round-robin-epoch``     every batch of task 1, then every batch of task 2, then task 3
``fusion``                the average update on batch k, then the contrastive update on the
                          same batch k of ``--fusion-task``
``supervised-first``      ``--first-phase-epochs`` epochs of average updates, then contrastive
                          epochs (every batch of task 1, then task 2, then task 3)
``contrastive-first``     the same, contrastive epochs first
``contrastive``           contrastive epochs only, no head (the recipe's SimCSE-unsup phase of
                          the "3 Given" pre-training, §4.1)
========================= ==================================================================

The supervised parts are those of the tasks with a head; the contrastive-only batches are those of
``--contrastive-tasks`` (the task resolves its default: the heads' tasks, fusion's task alone).
Seed 004's Table 1 trains the sentiment head only and contrasts the sentences of all three
datasets, "first SST data, then Quora data, and finally SemEval STS data" (§5.3): with fusion,
the other datasets' contrastive batches follow the epoch's fused updates.

Down-sampling (``--downsample smallest``, the seed's final model): every epoch each task
trains on as many rows as the smallest task has, drawn afresh from all its rows (SST and Quora
"proportionally down-sampled to the same length as the STS dataset"). Tasks with fewer batches
(``--downsample none``) restart from their first batch in an average update, as fairseq's
``RoundRobinZipDatasets`` does. The rows of an epoch are a permutation keyed by (seed, epoch,
task): no global RNG, so a resumed run replays the same batches.
"""

from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from fairseq.data import data_utils

from .own_items_dataset import OwnItemsDataset

SCHEDULES = ("average", "round-robin-batch", "round-robin-epoch", "fusion", "supervised-first",
             "contrastive-first", "contrastive")
CONTRASTIVE_SCHEDULES = ("fusion", "supervised-first", "contrastive-first", "contrastive")
DOWNSAMPLE_CHOICES = ("smallest", "none")
SUPERVISED, CONTRASTIVE = 0, 1


class TaskRows:
    """One task's split: its sentence columns (1 or 2 datasets of ``<s> ... </s>`` rows) and labels."""

    def __init__(self, name: str, columns: Sequence, labels: np.ndarray):
        self.name = name
        self.columns = list(columns)
        self.labels = np.asarray(labels)
        if any(len(c) != len(self.labels) for c in self.columns):
            raise ValueError(f"{name}: columns of {[len(c) for c in self.columns]} rows for {len(self.labels)} labels")

    def __len__(self):
        return len(self.labels)

    @property
    def is_pair(self) -> bool:
        return len(self.columns) == 2

    def size(self, row: int) -> int:
        return max(int(c.sizes[row]) for c in self.columns)


def epoch_rows(sizes: Dict[str, int], epoch: int, seed: int, downsample: str, shuffle: bool = True) -> Dict[str, np.ndarray]:
    """The rows each task trains on in ``epoch``: a permutation keyed by (seed, epoch, task),
    cut to the smallest task's size with ``downsample == 'smallest'``."""
    keep = min(sizes.values()) if downsample == "smallest" else None
    out = {}
    for t, (name, n) in enumerate(sizes.items()):
        if shuffle:
            rows = np.random.default_rng([seed, epoch, t]).permutation(n)
        else:
            rows = np.arange(n)
        out[name] = rows[:keep] if keep is not None else rows
    return out


def chunks(rows: np.ndarray, batch_size: int) -> List[np.ndarray]:
    return [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]


def plan(schedule: str, per_task: Dict[str, List[np.ndarray]], epoch: int = 1, fusion_task: Optional[str] = None,
         first_phase_epochs: int = 0, supervised: Optional[Sequence[str]] = None,
         contrastive: Optional[Sequence[str]] = None) -> List[List[tuple]]:
    """The updates of ``epoch``: each a list of (phase, task, rows) parts, from each task's batches.
    ``supervised``: the tasks with a head (default: all of ``per_task``); ``contrastive``: the tasks
    whose contrastive-only batches the schedule trains (default: the supervised ones; fusion: none
    besides its fused batches; ``contrastive``: all of ``per_task``)."""
    names = list(per_task) if supervised is None else list(supervised)
    longest = max((len(per_task[n]) for n in names), default=0)

    def average(k):
        return [(SUPERVISED, n, per_task[n][k % len(per_task[n])]) for n in names if per_task[n]]

    def sequential(phase, tasks):
        return [[(phase, n, b)] for n in tasks for b in per_task[n]]

    if schedule == "average":
        return [average(k) for k in range(longest)]
    if schedule == "round-robin-batch":
        return [[(SUPERVISED, n, per_task[n][k])] for k in range(longest) for n in names if k < len(per_task[n])]
    if schedule == "round-robin-epoch":
        return sequential(SUPERVISED, names)
    if schedule == "fusion":
        out = []
        for k in range(longest):
            out.append(average(k))
            batches = per_task[fusion_task]
            out.append([(CONTRASTIVE, fusion_task, batches[k % len(batches)])])
        return out + sequential(CONTRASTIVE, [n for n in contrastive or () if n != fusion_task])
    if schedule == "contrastive":
        return sequential(CONTRASTIVE, list(per_task) if contrastive is None else contrastive)
    if schedule in ("supervised-first", "contrastive-first"):
        first = epoch <= first_phase_epochs
        if first == (schedule == "supervised-first"):
            return [average(k) for k in range(longest)]
        return sequential(CONTRASTIVE, names if contrastive is None else contrastive)
    raise ValueError(f"unknown schedule '{schedule}', choose from {', '.join(SCHEDULES)}")


class MultitaskDataset(OwnItemsDataset):
    """The tasks' rows in both phases; :meth:`batches` is the schedule's plan of an epoch."""

    def __init__(self, tasks: Dict[str, TaskRows], pad: int, schedule: str = "average",
                 downsample: str = "smallest", seed: int = 1, fusion_task: Optional[str] = None,
                 first_phase_epochs: int = 0, train: bool = True, supervised: Optional[Sequence[str]] = None,
                 contrastive: Optional[Sequence[str]] = None):
        super().__init__()
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule '{schedule}', choose from {', '.join(SCHEDULES)}")
        self.tasks = dict(tasks)
        self.names = list(self.tasks)
        self.pad = pad
        self.schedule, self.downsample, self.seed = schedule, downsample, seed
        self.fusion_task, self.first_phase_epochs, self.train = fusion_task, first_phase_epochs, train
        # the tasks with a head (validation scores these only) and those the contrastive batches read
        self.supervised = self.names if supervised is None else list(supervised)
        self.contrastive = contrastive
        self.offsets, total = {}, 0
        for name in self.names:
            self.offsets[name] = total
            total += len(self.tasks[name])
        self.total = total
        self._sizes = np.array([self.tasks[n].size(r) for n in self.names for r in range(len(self.tasks[n]))] * 2,
                               dtype=np.int64)
        self.epoch = 1

    # ---- indices -------------------------------------------------------------------
    def index(self, phase: int, task: str, row: int) -> int:
        return phase * self.total + self.offsets[task] + int(row)

    def locate(self, index: int):
        phase, rest = divmod(int(index), self.total)
        for name in reversed(self.names):
            if rest >= self.offsets[name]:
                return phase, name, rest - self.offsets[name]
        raise IndexError(index)

    def __len__(self):
        return 2 * self.total

    def __getitem__(self, index):
        phase, name, row = self.locate(index)
        task = self.tasks[name]
        return {"id": int(index), "phase": phase, "task": name,
                "tokens": [c[row] for c in task.columns], "label": task.labels[row]}

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # the plan changes every epoch

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        self.epoch = epoch

    # ---- the plan ---------------------------------------------------------------------
    def updates(self, epoch: int, batch_size: int) -> List[List[tuple]]:
        """(phase, task, rows) parts of each update of ``epoch`` (training: the schedule;
        validation: every row of each task in order, supervised)."""
        if not self.train:
            sizes = {n: len(self.tasks[n]) for n in self.supervised}
            rows = epoch_rows(sizes, epoch, self.seed, "none", shuffle=False)
            return plan("round-robin-epoch", {n: chunks(r, batch_size) for n, r in rows.items()})
        rows = epoch_rows({n: len(self.tasks[n]) for n in self.names}, epoch, self.seed, self.downsample)
        per_task = {n: chunks(r, batch_size) for n, r in rows.items()}
        return plan(self.schedule, per_task, epoch, self.fusion_task, self.first_phase_epochs, self.supervised,
                    self.contrastive)

    def batches(self, epoch: int, batch_size: int) -> List[np.ndarray]:
        """fairseq's batch list of ``epoch``: the dataset indices of each update."""
        return [np.array([self.index(phase, name, r) for phase, name, rows in update for r in rows], dtype=np.int64)
                for update in self.updates(epoch, batch_size)]

    # ---- batches ----------------------------------------------------------------------
    def collater(self, samples):
        """{"multitask": {task: {"src_tokens", "target"}}} for the supervised rows (a pair task's
        src_tokens: the B first sentences, then the B second ones), and the ``contrastive`` part
        of the sample contract (docs/design.md) for the contrastive rows: their sentences as
        anchors and again as positives (SimCSE-unsupervised: dropout makes the two views)."""
        if not samples:
            return {}
        out = {"id": torch.LongTensor([s["id"] for s in samples]), "nsentences": len(samples)}
        ntokens = 0
        supervised = {}
        for name in self.names:
            rows = [s for s in samples if s["phase"] == SUPERVISED and s["task"] == name]
            if not rows:
                continue
            width = len(rows[0]["tokens"])
            sentences = [s["tokens"][k] for k in range(width) for s in rows]
            ntokens += sum(len(t) for t in sentences)
            labels = np.array([s["label"] for s in rows])
            target = torch.from_numpy(labels.astype(np.int64 if name == "sentiment" else np.float32))
            supervised[name] = {"src_tokens": data_utils.collate_tokens(sentences, self.pad), "target": target}
        if supervised:
            out["multitask"] = supervised
        views = []  # per task: the first sentences, then the second ones (as a pair task's rows)
        for name in self.names:
            rows = [s for s in samples if s["phase"] == CONTRASTIVE and s["task"] == name]
            if rows:
                views += [s["tokens"][k] for k in range(len(rows[0]["tokens"])) for s in rows]
        if views:
            ntokens += 2 * sum(len(t) for t in views)
            out["contrastive"] = {
                "src_tokens": data_utils.collate_tokens(views + views, self.pad),
                "num_anchors": len(views), "positives_per_anchor": 1, "hard_negatives": False,
            }
        out["ntokens"] = ntokens
        return out
