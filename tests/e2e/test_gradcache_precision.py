"""GradCache under mixed precision: fairseq's loss scaler (fp16), autocast with a grad scaler
(the --amp mechanism) and bfloat16 reach the cached gradients as they reach ordinary ones.

fp16 and amp are CUDA modes in fairseq-train, so they are checked here with fairseq's real
FP16Optimizer (unflattened: its flat buffer is CUDA-only) on a half model on the CPU, and with
torch's CPU autocast and GradScaler, which take the same code path in gradcache.py as CUDA's.
--bf16 runs end to end on the CPU (fairseq_fixes/bf16_without_tpu.py).
"""

import json

import pytest
import torch

from helpers import EXCLUSIVE, run_cli, train_args
from test_gradcache import _assert_resume_is_bit_exact, _assert_same, _build, _chunked_with_graph

CHUNK = 16  # 74 views: chunks of 16 do not divide them


def _backward(model, criterion, sample, chunk, backward, monkeypatch=None, seed=11):
    """Gradients (as the parameters hold them: scaled, in the model's dtype, as float32) of one
    forward + ``backward(loss)``; chunk 0 with ``monkeypatch``: the same chunks with their graphs."""
    criterion.cfg.contrastive_chunk_size = 0 if monkeypatch else chunk
    if monkeypatch:
        monkeypatch.setattr("fairseq_clear.criterions.clear.cached_encode", _chunked_with_graph(chunk))
    model.train()
    model.zero_grad()
    torch.manual_seed(seed)
    try:
        loss, _, _ = criterion(model, sample)
        backward(loss)
    finally:
        if monkeypatch:
            monkeypatch.undo()
    return float(loss), {n: p.grad.float().clone() for n, p in model.named_parameters() if p.grad is not None}


def _relative_gap(a, b):
    return max(float((a[k] - b[k]).abs().max()) / max(1e-3, float(b[k].abs().max())) for k in b)


@pytest.fixture
def dropout_model(tiny_data):
    """(cfg, model, criterion, sample) as test_gradcache's, with dropout on and Adam."""
    cfg, task, model, criterion = _build(tiny_data, "--dropout", "0.1", "--attention-dropout", "0.1",
                                         "--optimizer", "adam", "--lr", "1e-3")
    dataset = task.dataset("train")
    return cfg, model, criterion, dataset.collater([dataset[i] for i in range(37)])


def test_fp16_loss_scale_reaches_the_cached_gradients(dropout_model, monkeypatch):
    """fairseq's FP16Optimizer scales the loss; the cached gradients are those of the scaled
    loss, so a half model's gradients equal those of the same chunks with their graphs, and
    divided by the scale they are the fp32 model's (the scale is applied once, not 0 or 2 times)."""
    from fairseq import optim

    cfg, model, criterion, sample = dropout_model
    _, fp32 = _backward(model, criterion, sample, CHUNK, lambda loss: loss.backward())
    model.half()
    scale = 2.0 ** 10
    # fairseq-train --fp16 --fp16-no-flatten-grads --fp16-init-scale 1024 (built after the
    # criterion, which refuses --fp16 on the CPU)
    cfg.common.fp16, cfg.common.fp16_no_flatten_grads, cfg.common.fp16_init_scale = True, True, scale
    optimizer = optim.FP16Optimizer.build_optimizer(cfg, list(model.parameters()))
    assert optimizer.scaler.loss_scale == scale
    _, ref = _backward(model, criterion, sample, CHUNK, optimizer.backward, monkeypatch)
    optimizer.zero_grad()  # as the trainer does before each update: it sets the unscale factor
    _, cached = _backward(model, criterion, sample, CHUNK, optimizer.backward)
    assert any(k.startswith("encoder.sentence_encoder.layers.0") for k in cached)
    # the same half ops on both sides, gradients summed over chunks in another order: a few
    # ulps of fp16 (epsilon 1e-3); a lost or doubled scale would be off by 1024x
    _assert_same(cached, ref, tol=1e-2)
    unscaled = {k: v / scale for k, v in cached.items()}
    assert _relative_gap(unscaled, fp32) < 0.05, _relative_gap(unscaled, fp32)
    # fairseq's own unscaled gradient norm agrees with fp32 training's
    norm = float(optimizer.clip_grad_norm(0))
    fp32_norm = float(torch.norm(torch.stack([g.norm() for g in fp32.values()])))
    assert norm == pytest.approx(fp32_norm, rel=0.02)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_and_grad_scaler_reach_the_cached_gradients(dropout_model, monkeypatch, dtype):
    """--amp's mechanism (autocast forward, GradScaler backward) on the CPU: the re-encoding in
    the backward pass runs under the forward's autocast, so it computes what the forward did."""
    _, model, criterion, sample = dropout_model
    _, fp32 = _backward(model, criterion, sample, CHUNK, lambda loss: loss.backward())
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)

    def run(patch):
        # without autocast's weight-cast cache: with it, the reference's chunks share one
        # low-precision copy of each weight and sum their gradients in that precision, while
        # each re-encoded chunk sends its own to the fp32 gradient (both right, not equal)
        with torch.autocast("cpu", dtype=dtype, cache_enabled=False):
            return _backward(model, criterion, sample, CHUNK, lambda loss: scaler.scale(loss).backward(), patch)

    _, ref = run(monkeypatch)
    _, cached = run(None)
    _assert_same(cached, ref, tol=1e-4)
    # unscaled, the fp32 model's gradient up to low-precision noise (a lost or doubled scale
    # would make the norm ratio 1/256 or 256)
    flat = lambda g: torch.cat([g[k].flatten() for k in sorted(fp32)])  # noqa: E731
    unscaled, reference = flat(cached) / scaler.get_scale(), flat(fp32)
    assert float(unscaled.norm() / reference.norm()) == pytest.approx(1.0, abs=0.05)
    assert float(torch.nn.functional.cosine_similarity(unscaled, reference, dim=0)) > 0.98


def test_autocast_is_what_makes_the_re_encoding_match(dropout_model, monkeypatch):
    """The check above can fail: re-encoding without the forward's autocast (fp32 in the
    backward, bf16 in the forward) gives gradients that differ from the same chunks with graphs."""
    from fairseq_clear import gradcache

    _, model, criterion, sample = dropout_model

    def run(patch):
        with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
            return _backward(model, criterion, sample, CHUNK, lambda loss: loss.backward(), patch)

    _, ref = run(monkeypatch)
    monkeypatch.setattr(gradcache, "_autocast_state", lambda device: ("cpu", False, torch.float32))
    _, wrong = run(None)
    assert _relative_gap(wrong, ref) > 1e-3


def test_bf16_training_with_chunks_on_cpu(tiny_data, tmp_path):
    """fairseq-train --bf16 trains in bfloat16 without a TPU (the implied --tpu is taken back),
    with both chunk options, and the loss falls."""
    from fairseq_clear.checkpoint_safety import safe_load

    save = tmp_path / "bf16"
    proc = run_cli(train_args(tiny_data, save, "--bf16", "--contrastive-chunk-size", "6", "--mlm-chunk-size", "6",
                              "--dropout", "0.1", max_update=30))
    assert "--bf16 without torch_xla: bfloat16 on the CPU" in proc.stdout
    logs = [json.loads(line.split("| train_inner | ", 1)[1]) for line in proc.stdout.splitlines()
            if "| train_inner | " in line]
    assert len(logs) == 30
    losses = [float(r["loss"]) for r in logs]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) < sum(losses[:5])
    state = safe_load(save / "checkpoint_last.pt")["model"]
    weights = [v for k, v in state.items() if k.endswith(".weight") and v.is_floating_point()]
    # fairseq saves bf16 tensors as float32 (utils.move_to_cpu); trained in bf16, every value
    # is one that bf16 can hold, which float32 training would not give after 30 Adam steps
    assert weights and all(torch.equal(v, v.to(torch.bfloat16).float()) for v in weights)


def test_bf16_training_with_chunks_resumes_bit_exactly(tiny_data, tmp_path):
    _assert_resume_is_bit_exact(tiny_data, tmp_path, ["--bf16", "--contrastive-chunk-size", "6",
                                                      "--dropout", "0.1"], 6)


@pytest.mark.parametrize("flat", [False, True])
def test_fp16_optimizer_state_carries_the_fp32_master_weights(flat, plugin_run):
    """fairseq_fixes/mixed_precision_resume.py: a resumed FP16Optimizer continues from the saved
    fp32 masters and loss-scaler counters, not from the half weights' rounding (fairseq's flat
    buffer is built by hand on the CPU here, keyed by the parameters' device index as fairseq keys
    it, since fairseq builds it only on CUDA)."""
    import fairseq_clear  # noqa: F401
    from fairseq import optim
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({
        "common": {"fp16": True, "bf16": False, "fp16_no_flatten_grads": not flat, "fp16_init_scale": 128,
                   "fp16_scale_window": 4, "fp16_scale_tolerance": 0.0, "threshold_loss_scale": None,
                   "min_loss_scale": 1e-4, "model_parallel_size": 1},
        "optimizer": {"_name": "sgd", "lr": [0.1], "momentum": 0.0, "weight_decay": 0.0},
        "optimization": {"update_freq": [1]}, "distributed_training": {"distributed_world_size": 1}})

    def build(params):
        if not flat:
            return optim.FP16Optimizer.build_optimizer(cfg, params)
        buffer = torch.nn.Parameter(torch.cat([p.detach().float().flatten() for p in params]))
        buffer.grad = torch.zeros_like(buffer)
        return optim.FP16Optimizer(cfg, params, optim.build_optimizer(cfg.optimizer, [buffer]), {None: buffer})

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 3).half()), torch.nn.Parameter(torch.randn(7).half())]
    first = build(params)
    for step in range(6):  # masters move by less than half's resolution: the rounding differs
        first.zero_grad()
        first.backward(sum((p.float() * (step + 1) * 1e-4).sum() for p in params))
        first.step()
    state = first.state_dict()
    assert "fp32_master_params" in state and state["loss_scaler_counters"]["_iter"] == 6
    masters = [m.clone() for m in state["fp32_master_params"]]
    assert any(not torch.equal(m, p.detach().float()) for m, p in zip(masters, params))

    # each saved master belongs to its parameter (the half weight is its rounding)
    assert all(torch.equal(m.half(), p.detach()) for m, p in zip(masters, params))
    counters = dict(state["loss_scaler_counters"])
    assert counters["_last_rescale_iter"] == first.scaler._last_rescale_iter > 0

    from fairseq_clear.fairseq_fixes.mixed_precision_resume import _masters

    def resumed(state_dict):
        opt = build([torch.nn.Parameter(p.detach().clone()) for p in params])  # masters from the model
        opt.load_state_dict(state_dict)
        return opt

    second = resumed(state)
    assert all(torch.equal(a, b) for a, b in zip(_masters(second), masters))
    assert {k: getattr(second.scaler, k) for k in counters} == counters
    assert second.scaler.loss_scale == first.scaler.loss_scale
    # and one more step goes on identically
    for opt, ps in ((first, params), (second, second.fp16_params)):
        opt.zero_grad()
        opt.backward(sum((p.float() * 7e-4).sum() for p in ps))
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(_masters(first), _masters(second)))

    # an older checkpoint without the keys, and malformed values from a file: fairseq's rebuilt
    # masters and a fresh scaler window, with a warning for the malformed ones, never a crash
    rebuilt = [p.detach().float() for p in params]
    bad_masters = ([torch.full_like(m, float("nan")) for m in masters], ["x", "y"], masters[:1],
                   [m.long() for m in masters], "masters", None)
    bad_counters = ({**counters, "_iter": "6"}, {**counters, "_iter": True}, {"_iter": 6}, [6],
                    {**counters, "_last_rescale_iter": counters["_iter"]})
    plain = {k: v for k, v in state.items() if k not in ("fp32_master_params", "loss_scaler_counters")}
    for bad in [plain] + [{**plain, "fp32_master_params": b} for b in bad_masters] + \
               [{**plain, "loss_scaler_counters": b} for b in bad_counters]:
        opt = resumed(bad)
        assert all(torch.equal(a, b) for a, b in zip(_masters(opt), rebuilt)), bad.keys()
        assert opt.scaler._iter == 0 and opt.scaler.loss_scale == first.scaler.loss_scale

    # a checkpoint from another model: a warning, fairseq's rebuilt masters stay
    other = build([torch.nn.Parameter(torch.zeros(3, 5).half()), torch.nn.Parameter(torch.zeros(7).half())])
    other.load_state_dict(state)
    assert all(not m.any() for m in _masters(other))


@EXCLUSIVE
def test_bf16_with_chunks_on_two_gloo_ranks(tiny_data, tmp_path):
    """--bf16 with chunks and negatives gathered across 2 torchrun ranks (the vectors cross the
    ranks in bfloat16): one 2-rank job trains, every update over both ranks' sentences."""
    from harness.runs import logged
    from helpers import torchrun

    args = train_args(tiny_data, tmp_path / "save", "--bf16", "--distributed-backend", "gloo",
                      "--ddp-backend", "legacy_ddp", "--contrastive-chunk-size", "3", max_update=4, batch_size=8)
    proc = run_cli(torchrun(args), timeout=600)
    records = logged(proc.stdout)
    assert "distributed init (rank 1)" in proc.stdout and "bfloat16 on the CPU" in proc.stdout
    assert [int(r["num_updates"]) for r in records] == [1, 2, 3, 4], proc.stdout[-3000:]
    assert all(int(float(r["bsz"])) == 16 and 0 < float(r["loss"]) < float("inf") for r in records)


def test_bf16_untie_leaves_an_explicit_tpu_alone():
    """Only the --tpu that --bf16 implied is taken back: not fairseq-train's --tpu, not hydra's
    common.tpu=true."""
    from omegaconf import OmegaConf

    from fairseq_clear.fairseq_fixes.bf16_without_tpu import untie

    def cfg():
        return OmegaConf.create({"common": {"bf16": True, "tpu": True, "cpu": True},
                                 "optimizer": {"tpu": True}, "dataset": {"batch_size": 8}})

    for argv in (["fairseq-train", "data", "--bf16", "--tpu"], ["fairseq-hydra-train", "common.tpu=true"]):
        c = cfg()
        assert untie(c, argv) is False and c.common.tpu is True
    c = cfg()
    assert untie(c, ["fairseq-train", "data", "--bf16"]) is True
    assert c.common.tpu is False and c.optimizer.tpu is False and c.dataset.batch_size == 8
