"""GradCache (--contrastive-chunk-size): the same gradients as encoding the chunks with their
graphs kept (and, without dropout, as encoding the whole batch at once); resumes stay bit-exact."""

import pytest
import torch

from helpers import EXCLUSIVE, run_cli, train_args


def _setup(tiny_data, *extra):
    _, task, model, criterion = _build(tiny_data, *extra)
    dataset = task.dataset("train")
    sample = dataset.collater([dataset[i] for i in range(37)])  # 74 views: chunks of 16 do not divide it
    return model, criterion, sample


def _build(tiny_data, *extra):
    import fairseq_clear  # noqa: F401
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(tiny_data), "--user-dir", str(fairseq_clear.__path__[0]),
                                                "--arch", "clear_roberta_tiny", "--criterion", "clear",
                                                "--task", "clear", "--tokens-per-sample", "64", "--seed", "3",
                                                *extra])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    torch.manual_seed(0)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    return cfg, task, model, criterion


def _grads(model, criterion, sample, chunk, seed=11, reference=None, monkeypatch=None):
    criterion.cfg.contrastive_chunk_size = chunk
    if reference is not None:
        monkeypatch.setattr("fairseq_clear.criterions.clear.cached_encode", reference)
    model.train()
    model.zero_grad()
    torch.manual_seed(seed)
    loss, _, log = criterion(model, sample)
    loss.backward()
    if reference is not None:
        monkeypatch.undo()
    return float(loss), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _chunked_with_graph(chunk):
    def encode(fn, src, chunk_size, parameters):
        return torch.cat([fn(c) for c in torch.split(src, chunk)])
    return encode


def _assert_same(a, b, tol=1e-6):
    """Every parameter's gradient equal within ``tol`` relative to its largest entry (the loss
    is a sum, so gradients reach tens; float sums in another order differ in the 7th digit)."""
    assert a.keys() == b.keys()
    worst = max(float((a[k] - b[k]).abs().max()) / max(1.0, float(b[k].abs().max())) for k in a)
    assert worst <= tol, worst


@pytest.mark.parametrize("extra", [[], ["--mlm", "off"], ["--loss-form", "simcse"], ["--augmentations", "none", "--mlm", "on"]])
@pytest.mark.parametrize("chunk", [16, 37])
def test_dropout_on_same_gradients_as_the_same_chunks_with_graph(tiny_data, monkeypatch, extra, chunk):
    model, criterion, sample = _setup(tiny_data, "--dropout", "0.1", "--attention-dropout", "0.1", *extra)
    loss_ref, ref = _grads(model, criterion, sample, 0, reference=_chunked_with_graph(chunk), monkeypatch=monkeypatch)
    rng_after = torch.get_rng_state()
    loss_gc, gc = _grads(model, criterion, sample, chunk)
    assert loss_gc == pytest.approx(loss_ref, abs=1e-6)
    _assert_same(gc, ref)
    assert any(k.startswith("encoder.sentence_encoder.layers.0") for k in gc)
    # the re-encoding leaves the RNG where the forward left it (resumes replay exactly)
    assert torch.equal(torch.get_rng_state(), rng_after)


@pytest.mark.parametrize("chunk", [8, 30])
def test_dropout_off_same_gradients_as_the_whole_batch(tiny_data, chunk):
    model, criterion, sample = _setup(tiny_data, "--dropout", "0", "--attention-dropout", "0")
    # in float64: float32 sums over chunks of other padded lengths differ from the whole batch's
    # by ~1e-6 relative (rounding, not GradCache), which would hide a small real error
    model.double()
    loss_full, full = _grads(model, criterion, sample, 0)
    loss_gc, gc = _grads(model, criterion, sample, chunk)
    assert loss_gc == pytest.approx(loss_full, abs=1e-10)
    _assert_same(gc, full, tol=1e-12)


def test_bad_chunk_size_and_ddp_backend_are_refused(tiny_data, tmp_path):
    proc = run_cli(train_args(tiny_data, tmp_path / "s", "--contrastive-chunk-size", "-1", max_update=1), check=False)
    assert proc.returncode != 0 and "--contrastive-chunk-size must be >= 0" in proc.stdout


def _assert_resume_is_bit_exact(tiny_data, tmp_path, options, updates):
    """Training ``updates`` straight equals training half, stopping and resuming."""
    from fairseq_clear.checkpoint_safety import safe_load

    options = [*options, "--save-interval-updates", str(updates // 2)]
    run_cli(train_args(tiny_data, tmp_path / "straight", *options, max_update=updates))
    run_cli(train_args(tiny_data, tmp_path / "resumed", *options, max_update=updates // 2))
    run_cli(train_args(tiny_data, tmp_path / "resumed", *options, max_update=updates))
    a = safe_load(tmp_path / "straight" / "checkpoint_last.pt")["model"]
    b = safe_load(tmp_path / "resumed" / "checkpoint_last.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_training_with_chunks_resumes_bit_exactly(tiny_data, tmp_path):
    _assert_resume_is_bit_exact(tiny_data, tmp_path, ["--contrastive-chunk-size", "6"], 6)


# ---- --mlm-chunk-size: the masked-LM term in recomputed chunks ----------------------------

def _mlm_grads(model, criterion, sample, mlm_chunk, contrastive_chunk=0, seed=11):
    criterion.cfg.mlm_chunk_size = mlm_chunk
    try:
        return _grads(model, criterion, sample, contrastive_chunk, seed=seed)
    finally:
        criterion.cfg.mlm_chunk_size = 0


@pytest.mark.parametrize("mlm_chunk", [5, 16])
def test_mlm_chunks_dropout_off_same_gradients_as_the_whole_batch(tiny_data, mlm_chunk):
    model, criterion, sample = _setup(tiny_data, "--dropout", "0", "--attention-dropout", "0")
    model.double()
    loss_full, full = _mlm_grads(model, criterion, sample, 0)
    loss_chunked, chunked = _mlm_grads(model, criterion, sample, mlm_chunk, contrastive_chunk=8)
    assert loss_chunked == pytest.approx(loss_full, abs=1e-10)
    _assert_same(chunked, full, tol=1e-12)
    assert any(k.startswith("encoder.lm_head") for k in chunked)


def test_mlm_chunks_replay_dropout_and_leave_the_rng_as_the_forward_did(tiny_data, monkeypatch):
    model, criterion, sample = _setup(tiny_data, "--dropout", "0.1", "--attention-dropout", "0.1", "--cl-weight", "0")
    # the reference: the same chunks, each with its graph kept (no recomputation)
    monkeypatch.setattr("torch.utils.checkpoint.checkpoint", lambda fn, *a, use_reentrant=None: fn(*a))
    loss_ref, ref = _mlm_grads(model, criterion, sample, 7)
    monkeypatch.undo()
    criterion.cfg.mlm_chunk_size = 7
    model.train()
    model.zero_grad()
    torch.manual_seed(11)
    loss, _, _ = criterion(model, sample)
    rng_after_forward = torch.get_rng_state()
    loss.backward()
    assert torch.equal(torch.get_rng_state(), rng_after_forward)
    chunked = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    criterion.cfg.mlm_chunk_size = 0
    assert float(loss) == pytest.approx(loss_ref, abs=1e-6)
    _assert_same(chunked, ref)
    # and dropout was on: the whole batch at once draws other masks
    loss_full, _ = _mlm_grads(model, criterion, sample, 0)
    assert abs(loss_full - loss_ref) > 1e-6


def test_mlm_chunks_train_resume_and_refuse_bad_values(tiny_data, tmp_path):
    proc = run_cli(train_args(tiny_data, tmp_path / "bad", "--mlm-chunk-size", "-2", max_update=1), check=False)
    assert proc.returncode != 0 and "--mlm-chunk-size must be >= 0" in proc.stdout
    _assert_resume_is_bit_exact(tiny_data, tmp_path, ["--mlm-chunk-size", "5", "--contrastive-chunk-size", "6"], 4)


# ---- --accumulate-contrastive: one contrastive problem over the update's micro-batches ---------

def _one_update(tiny_data, micro_batches, *extra, monkeypatch):
    """Normalised gradient (parameter change / lr) and logged loss of ONE fairseq Trainer update
    over ``micro_batches`` (lists of dataset indices), in float64 with dropout off."""
    from fairseq import metrics
    from fairseq.trainer import Trainer

    # fairseq's gradient norm (logged; no clipping at --clip-norm 0) is computed in float32,
    # which torch refuses for float64 gradients: the same norm in float64
    monkeypatch.setattr(Trainer, "clip_grad_norm", lambda self, clip_norm: torch.linalg.vector_norm(
        torch.stack([p.grad.norm() for p in self.model.parameters() if p.grad is not None])))

    cfg, task, model, criterion = _build(tiny_data, "--dropout", "0", "--attention-dropout", "0",
                                         "--optimizer", "sgd", "--lr", "1", "--cpu", "--max-update", "5", *extra)
    model.double()
    trainer = Trainer(cfg, task, model, criterion)
    dataset = task.dataset("train")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    from fairseq_clear.fairseq_fixes import scope

    with metrics.aggregate(new_root=True) as agg, scope.entered():  # as in fairseq-train of our task
        trainer.train_step([dataset.collater([dataset[i] for i in ids]) for ids in micro_batches])
    grads = {n: before[n] - p.detach() for n, p in model.named_parameters()}
    return agg.get_smoothed_values(), grads


@pytest.mark.parametrize("extra", [[], ["--mlm", "off"], ["--loss-form", "simcse"], ["--contrastive-chunk-size", "5"],
                                   ["--mask-duplicates", "--matryoshka-dims", "128,32,8", "--contrastive-chunk-size", "5"]])
def test_accumulated_update_equals_one_big_batch(tiny_data, extra, monkeypatch):
    """update-freq 4 x B with --accumulate-contrastive = one update of 4B (same loss, same
    gradients); without the option the four micro-batches are four problems (different)."""
    groups = [list(range(i, i + 9)) for i in range(0, 36, 9)]
    log_big, big = _one_update(tiny_data, [list(range(36))], *extra, monkeypatch=monkeypatch)
    log_acc, acc = _one_update(tiny_data, groups, "--accumulate-contrastive", *extra, monkeypatch=monkeypatch)
    assert log_acc["loss"] == pytest.approx(log_big["loss"], abs=1e-9)
    assert log_acc["cl_loss"] == pytest.approx(log_big["cl_loss"], abs=1e-9)
    _assert_same(acc, big, tol=1e-10)
    log_sep, sep = _one_update(tiny_data, groups, *extra, monkeypatch=monkeypatch)
    assert abs(log_sep["cl_loss"] - log_big["cl_loss"]) > 1e-3  # 9 candidates, not 36: a smaller problem


def test_accumulated_training_resumes_bit_exactly(tiny_data, tmp_path):
    _assert_resume_is_bit_exact(tiny_data, tmp_path, ["--update-freq", "3", "--accumulate-contrastive",
                                                      "--contrastive-chunk-size", "7"], 4)


# ---- two gloo ranks: the gathered, chunked (and accumulated) problem = one process --------------

class _Backward:
    """What task.train_step needs of fairseq's optimizer here: backward(loss)."""

    @staticmethod
    def backward(loss):
        loss.backward()


def _two_rank_worker(rank, port, data, extra, groups, out):
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    _, task, model, criterion = _build(data, "--dropout", "0", "--attention-dropout", "0",
                                       "--ddp-backend", "legacy_ddp", *extra)
    assert criterion.gather  # the negatives of both ranks
    model.double().train()
    dataset = task.dataset("train")
    mine = groups[rank]
    task.begin_update(len(mine))  # what fairseq_fixes/update_group.py does in the trainer
    total = 0.0
    for ids in mine:
        _, sample_size, _ = task.train_step(dataset.collater([dataset[i] for i in ids]), model, criterion,
                                            _Backward(), update_num=0)
        total += float(sample_size)
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    summed = torch.tensor([total], dtype=torch.float64)
    dist.all_reduce(grads)
    dist.all_reduce(summed)
    out[rank] = (grads / summed).tolist()
    dist.destroy_process_group()


@EXCLUSIVE
@pytest.mark.parametrize("extra", [["--contrastive-chunk-size", "5"],
                                   ["--contrastive-chunk-size", "4", "--accumulate-contrastive"]])
def test_two_gloo_ranks_same_gradient_as_one_process(tiny_data, extra):
    """2 ranks (gathered negatives), each with 2 micro-batches of 9 (chunks that do not divide
    them): the all-reduced, normalised gradient equals one process's over all 36 sentences
    when the update is one problem (--accumulate-contrastive); with chunks alone each rank's
    micro-batch i is a problem with the other rank's micro-batch i, which the reference mirrors."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    groups = [[list(range(0, 9)), list(range(9, 18))], [list(range(18, 27)), list(range(27, 36))]]
    out = mp.Manager().dict()
    mp.start_processes(_two_rank_worker, args=(port, tiny_data, extra, groups, out), nprocs=2, join=True,
                       start_method="spawn")
    assert out[0] == out[1]  # all-reduced: the ranks agree
    _, task, model, criterion = _build(tiny_data, "--dropout", "0", "--attention-dropout", "0",
                                       "--contrastive-chunk-size", "0")
    model.double().train()
    dataset = task.dataset("train")
    problems = ([groups[0][0] + groups[0][1] + groups[1][0] + groups[1][1]] if "--accumulate-contrastive" in extra
                else [groups[0][0] + groups[1][0], groups[0][1] + groups[1][1]])
    total = 0.0
    for ids in problems:
        loss, sample_size, _ = criterion(model, dataset.collater([dataset[i] for i in ids]))
        loss.backward()
        total += float(sample_size)
    ref = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]) / total
    got = torch.tensor(out[0], dtype=torch.float64)
    assert got.shape == ref.shape
    assert float((got - ref).abs().max()) <= 1e-10 * max(1.0, float(ref.abs().max())), float((got - ref).abs().max())


@pytest.mark.parametrize("extra", [["--mlm-only"], []])
def test_accumulation_zeroes_stand_in_batches_on_every_path(tiny_data, extra):
    """A stand-in batch (ignore_grad) inside an accumulated update adds nothing, also when the
    task has no views (--mlm-only takes the plain path); after the update's last micro-batch a
    call outside fairseq's trainer is plain again and fairseq's own ignore_grad applies."""
    _, task, model, criterion = _build(tiny_data, "--accumulate-contrastive", *extra)
    model.train()
    dataset = task.dataset("train")
    sample = dataset.collater([dataset[i] for i in range(8)])

    def step(ignore_grad):
        model.zero_grad()
        loss, _, _ = task.train_step(sample, model, criterion, _Backward(), update_num=0, ignore_grad=ignore_grad)
        return float(loss), max(float(p.grad.abs().max()) for p in model.parameters() if p.grad is not None)

    task.begin_update(2)
    assert step(ignore_grad=True) == (0.0, 0.0)  # micro-batch 0 of 2: a stand-in
    loss, grad = step(ignore_grad=False)  # micro-batch 1 of 2: real, the update's last
    assert loss > 0 and grad > 0
    assert task.step is None and step(ignore_grad=True) == (0.0, 0.0)  # outside an update: a stand-in still counts zero
