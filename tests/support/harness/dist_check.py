"""Compare the contrastive loss across gloo ranks with one process holding the whole batch.

``run(world_size, sizes, ...)`` starts ``world_size`` CPU processes; rank ``r`` holds
``sizes[r]`` sentences of a fixed global batch (0 = the rank ran out of data and
feeds fairseq's dummy batch). Every rank computes the loss and gradients as
fairseq's trainer would (loss·0 and sample size 0 for a dummy batch, gradients
summed over ranks, divided by the summed sample size); the result is compared by
the caller with :func:`reference`, the same computation in one process.

Two levels are checked: the bare loss functions over :func:`gather_with_grad`
(``level="loss"``) and the whole ``ClearCriterion`` (``level="criterion"``: MLM and
contrastive terms, normalisers exchanged across ranks) with a small stand-in model.

A case may carry a fourth item, a dict of criterion options (``mask_duplicates``,
``contrastive_chunk_size``, ``matryoshka_dims``, ...) and of the harness's own: ``double`` (the
model in float64), ``duplicates`` (``[(i, j), ...]``: sentence j's rows are copies of i's, so
that their keys are equal), ``queue_batches`` (k: with ``queue_size``, the same criterion first trains
on k earlier global batches, ``earlier_batch``, the model scaled by ``MOVE`` after each, so that the
momentum queue holds their positives and the momentum encoder differs from the model; the result then
holds ``queue``, the queue after the case's batch, and ``queues_equal``, whether every rank holds it
bit for bit) and ``queue_copies`` (``[(i, j), ...]``: row j of every earlier batch is a copy of the
case batch's row i, so that a queued vector shares its pair's texts).
"""

import os
import tempfile
from typing import Dict, List

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

VOCAB, DIM, LENGTH, PAD = 24, 8, 7, 1


class TinyModel(nn.Module):
    """Just enough of ClearRobertaModel's contract for the criterion (see docs/design.md)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(VOCAB, DIM, padding_idx=PAD)
        self.lm_head = nn.Linear(DIM, VOCAB)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, src_tokens, contrastive=False, masked_tokens=None, **kwargs):
        x = self.embed(src_tokens)
        if contrastive:
            keep = src_tokens.ne(PAD).unsqueeze(-1).float()
            return self.proj((x * keep).sum(1) / keep.sum(1).clamp(min=1)), {}
        if masked_tokens is not None:
            x = x[masked_tokens]
        return self.lm_head(x), {}


class _Dictionary:
    def pad(self):
        return PAD


class _Task:
    source_dictionary = target_dictionary = _Dictionary()


def global_batch(n: int, hard_negatives: bool = False, duplicates=(), seed: int = 1234) -> Dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, VOCAB, (n, LENGTH), generator=g)
    target = torch.full_like(tokens, PAD)
    masked = torch.rand(n, LENGTH, generator=g) < 0.3
    masked[:, 0] = True  # every sentence has a masked token
    target[masked] = tokens[masked]
    src = tokens.masked_fill(masked, 3)
    views = [torch.randint(4, VOCAB, (n, LENGTH), generator=g) for _ in range(3 if hard_negatives else 2)]
    for v in views:  # ragged lengths, as real views are
        lengths = torch.randint(2, LENGTH + 1, (n,), generator=g)
        v[torch.arange(LENGTH)[None, :] >= lengths[:, None]] = PAD
    for i, j in duplicates:  # a planted copy: the same anchor, positive (and hard negative)
        for v in views:
            v[j] = v[i]
    return {"src": src, "target": target, "views": views}


#: the factor the model's parameters are scaled by after each earlier batch of ``queue_batches``
MOVE = 1.1


def earlier_batch(n: int, hard_negatives: bool, options, e: int) -> Dict[str, torch.Tensor]:
    """The ``e``-th earlier global batch of a ``queue_batches`` case (``queue_copies`` planted)."""
    batch = global_batch(n, hard_negatives, seed=1235 + e)
    final = global_batch(n, hard_negatives, options.get("duplicates", ()))
    for i, j in options.get("queue_copies", ()):
        for v, f in zip(batch["views"], final["views"]):
            v[j] = f[i]
    return batch


def make_sample(batch, rows: List[int], dummy=False, hard_negatives=False):
    from fairseq_clear.negatives import token_key

    idx = torch.tensor(rows, dtype=torch.long)
    views = batch["views"]
    rows_of = [v[idx] for v in views]
    keys = torch.tensor([token_key(r[r.ne(PAD)]) for v in rows_of for r in v], dtype=torch.long)
    return {
        "net_input": {"src_tokens": batch["src"][idx], "src_lengths": None},
        "target": batch["target"][idx],
        "contrastive": {
            "src_tokens": torch.cat([v[idx] for v in views]),
            "num_anchors": len(rows),
            "positives_per_anchor": 1,
            "hard_negatives": hard_negatives,
            "source_keys": keys,
        },
        "ntokens": int(batch["src"][idx].ne(PAD).sum()),
        "nsentences": len(rows),
    }


def _criterion(loss_form, world_size, dummy=False, options=None):
    from fairseq_clear.criterions.clear import ClearCriterion, ClearCriterionConfig

    options = {k: v for k, v in (options or {}).items() if k not in HARNESS_OPTIONS}
    cfg = ClearCriterionConfig(
        temperature=0.05, loss_form=loss_form, world_size=world_size, tpu=False,
        gather_negatives="auto", ddp_backend="legacy_ddp", **options,
    )
    task = _Task()
    from fairseq_clear.tasks.contrastive import Step

    task.step = Step(stand_in=dummy)  # what ContrastiveTask.train_step sets for fairseq's dummy batch
    return ClearCriterion(cfg, task)


#: case options that are the harness's, not the criterion's
HARNESS_OPTIONS = ("double", "duplicates", "queue_batches", "queue_copies")


def _step(model, sample, loss_form, world_size, level, dummy, options=None, criterion=None):
    """One rank's (loss, sample_size, logs) as fairseq's trainer sees them; leaves grads in model."""
    from fairseq_clear import distributed, losses

    logs = {}
    if level == "criterion":
        criterion = criterion or _criterion(loss_form, world_size, dummy, options)
        loss, sample_size, logs = criterion(model, sample)
    else:
        views = sample["contrastive"]
        z = model(views["src_tokens"], contrastive=True)[0]
        n = views["num_anchors"]
        za, zp, zh = z[:n], z[n: 2 * n], (z[2 * n:] if views["hard_negatives"] else None)
        if dummy:
            za, zp = za[:0], zp[:0]
            zh = zh[:0] if zh is not None else None
        offset = 0
        if world_size > 1:
            group = dist.group.WORLD
            sizes = distributed.all_gather_counts([za.size(0)], group, za.device)[:, 0].tolist()
            offset = sum(sizes[: dist.get_rank()])
            za = distributed.gather_with_grad(za, sizes, group)
            zp = distributed.gather_with_grad(zp, sizes, group)
            if zh is not None:
                zh = distributed.gather_with_grad(zh, sizes, group)
        rows = torch.arange(offset, offset + (0 if dummy else n))
        if loss_form == "nt-xent":
            loss, _ = losses.nt_xent(za, zp, 0.05, rows)
        else:
            loss, _ = losses.simcse(za, zp, 0.05, rows, zh, 0.5)
        sample_size = torch.tensor(float(len(rows)))
    if dummy:  # FairseqTask.train_step(ignore_grad=True) and the trainer's zeroing
        loss = loss * 0
        sample_size = sample_size * 0
    loss.backward()
    dtype = loss.dtype if loss.dtype == torch.float64 else torch.float32
    extra = torch.tensor([float(logs.get(k, 0)) for k in LOGGED], dtype=torch.float64)
    return loss.detach(), torch.as_tensor(sample_size, dtype=dtype).detach(), extra


#: criterion logs summed over ranks into the result
LOGGED = ("cl_loss", "dup_masked", "guide_masked")


def _model(options):
    model = TinyModel()
    return model.double() if (options or {}).get("double") else model


def _result(model, loss, sample_size, extra):
    return {
        "loss_over_size": (loss / sample_size.clamp(min=1e-8)).item(),
        "grads": {k: (p.grad if p.grad is not None else torch.zeros_like(p)) / sample_size
                  for k, p in model.named_parameters()},
        **{k: float(v) for k, v in zip(LOGGED, extra)},
    }


def _earlier_batches(model, criterion, sizes, rank, loss_form, options):
    """``queue_batches``: the criterion trains on the earlier batches (this rank's rows of each), the
    model moved after each; the gradients are dropped."""
    hard = loss_form == "simcse"
    start, dummy = sum(sizes[:rank]), sizes[rank] == 0
    rows = [0] if dummy else list(range(start, start + sizes[rank]))
    for e in range(options.get("queue_batches", 0)):
        sample = make_sample(earlier_batch(sum(sizes), hard, options, e), rows, dummy=dummy, hard_negatives=hard)
        loss = criterion(model, sample)[0]
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.grad = None
                p.mul_(MOVE)


def reference(sizes, loss_form="nt-xent", level="criterion", options=None):
    """The whole batch (all ranks' sentences) in one process."""
    total = sum(sizes)
    hard = loss_form == "simcse"
    batch = global_batch(total, hard, (options or {}).get("duplicates", ()))
    model = _model(options)
    sample = make_sample(batch, list(range(total)), hard_negatives=hard)
    criterion = None
    if (options or {}).get("queue_batches"):
        criterion = _criterion(loss_form, 1, False, options)
        _earlier_batches(model, criterion, [total], 0, loss_form, options)
    loss, sample_size, extra = _step(model, sample, loss_form, 1, level, dummy=False, options=options,
                                     criterion=criterion)
    out = _result(model, loss, sample_size, extra)
    if criterion is not None:
        out["queue"] = criterion.queue.vectors.clone()
    return out


def _one(rank, world_size, sizes, loss_form, level, options=None):
    hard = loss_form == "simcse"
    batch = global_batch(sum(sizes), hard, (options or {}).get("duplicates", ()))
    model = _model(options)
    start = sum(sizes[:rank])
    dummy = sizes[rank] == 0
    # fairseq's dummy batch is a real batch (the first one), flagged and zeroed
    rows = [0] if dummy else list(range(start, start + sizes[rank]))
    sample = make_sample(batch, rows, dummy=dummy, hard_negatives=hard)
    criterion = None
    if (options or {}).get("queue_batches"):
        criterion = _criterion(loss_form, world_size, dummy, options)
        _earlier_batches(model, criterion, sizes, rank, loss_form, options)
    loss, sample_size, extra = _step(model, sample, loss_form, world_size, level, dummy, options, criterion)
    queue = None
    if criterion is not None:  # every rank's queue, to compare them bit for bit
        queue = criterion.queue.vectors.clone()
        queues = [torch.empty_like(queue) for _ in range(world_size)]
        dist.all_gather(queues, queue)
    stats = torch.stack([loss.to(sample_size.dtype), sample_size])
    dist.all_reduce(stats)
    dist.all_reduce(extra)
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)
    out = _result(model, stats[0], stats[1], extra)
    if queue is not None:
        out.update(queue=queue, queues_equal=all(torch.equal(q, queue) for q in queues))
    return out


def _worker(rank, world_size, init_file, cases, out_dir):
    import fairseq_clear  # noqa: F401  (the plugin, as fairseq-train imports it)

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        results = [_one(rank, world_size, *case) for case in cases]
        if rank == 0:
            torch.save(results, os.path.join(out_dir, "result.pt"))
    finally:
        dist.destroy_process_group()


def run(cases, timeout=300):
    """Run each ``(sizes, loss_form, level[, options])`` of ``cases`` on ``len(sizes)`` gloo ranks (one
    process group for all cases; every case has the same number of ranks); returns the
    summed results, in order."""
    world_size = len(cases[0][0])
    assert all(len(c[0]) == world_size for c in cases)
    with tempfile.TemporaryDirectory() as out_dir:
        init_file = os.path.join(out_dir, "init")
        ctx = mp.start_processes(
            _worker, args=(world_size, init_file, [tuple(c) for c in cases], out_dir),
            nprocs=world_size, join=False, start_method="spawn",
        )
        import time

        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=max(1, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                raise TimeoutError(f"ranks did not finish in {timeout}s")
        return torch.load(os.path.join(out_dir, "result.pt"), weights_only=True)
