"""Device memory of one training update, estimated without the device.

    python benchmarks/studies/estimate_memory.py                 # the paper's recipes on one GPU (fp16, 512 tokens)
    python benchmarks/studies/estimate_memory.py --validate      # against the CPU runs measured by bench_gradcache
    python benchmarks/studies/estimate_memory.py --config "--batch-size 8192 --contrastive-chunk-size 128 --mlm-chunk-size 128"

The real task, model, criterion and fairseq optimizer run one update (every micro-batch of
``--update-freq``, backward, gradient norm, Adam step) on fake tensors (torch's FakeTensorMode:
shapes and dtypes, no data, no arithmetic), and every storage they allocate is counted until it is
freed, in the CUDA caching allocator's 512-byte blocks, with the optimizer's state already
allocated (a first, small update creates it). The peak estimates what
``torch.cuda.max_memory_allocated()`` would report after the same update, to within several
per cent: CPU kernels differ from CUDA's in places (the CPU's fp16 log-softmax makes an fp32 copy
of the MLM logits: about +2 % at 512 tokens), and not counted are the flash-attention backward's
fp32 workspace, cuBLAS's workspace (tens of MiB), pytorch_ddp's gradient buckets (one more copy of
the gradients in the model's dtype), the CUDA context (0.5-1 GB), the data loader, and the caching
allocator's rounding and fragmentation (what runs out is reserved memory, which exceeds the
allocated: leave a margin).

What a fake tensor cannot know is fixed here: every row has ``--tokens`` tokens (no padding),
``--mask-prob`` of them are masked (fairseq masks that share of each row), each sentence has two
views of ``--view-tokens`` tokens (default ``--tokens``: an upper bound, as deletions shorten views),
and a scalar read from a tensor (a count, a check) reads 1 or False. ``--real --data DIR`` runs the
same update on real tensors and the task's own batches (tests/e2e/test_benchmarks.py: given the views'
padded length, the estimate allocates what that update does, to 1 %).
Attention: ``fused`` runs the fused kernel that keeps no T x T matrix for the backward (flash /
memory-efficient attention, what torch picks on a CUDA GPU; estimated with attention dropout 0,
which a fused kernel replays rather than stores); ``math`` keeps the attention probabilities and
their dropout mask (what the CPU runs with attention dropout). ``--validate`` compares the
``math`` estimate with the process RSS that bench_gradcache --full-step measured on this CPU.

One device only: on W GPUs with B sentences each, a GPU holds what one GPU holds for B (its
views' loss is 2B x 2WB instead of 2B x 2B), less than one GPU for W x B.
"""

import argparse
import contextlib
import math
import os
import shlex
import sys
import tempfile
import time
import weakref
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
import common  # noqa: E402

REPO = common.REPO

#: fairseq's roberta.base dictionary: 50,261 types + 4 specials
ROBERTA_VOCAB = 50265
#: the paper's recipes on one GPU (examples/pretrain_paper/) and the per-GPU work of the 256-GPU run
RECIPES = {
    "256 GPUs, per GPU (train_256gpu.sh)": "--batch-size 32",
    "1 GPU, 64 sentences, no chunks": "--batch-size 64",
    "1 GPU, 1,024 in one batch, no chunks": "--batch-size 1024",
    "1 GPU, 8,192 candidates (train_1gpu.sh)": "--batch-size 64 --update-freq 128 --accumulate-contrastive",
    "1 GPU, 8,192 candidates (train_1gpu.sh) with chunks of 32": "--batch-size 64 --update-freq 128 "
                                                                "--accumulate-contrastive --contrastive-chunk-size 32 "
                                                                "--mlm-chunk-size 32",
    "1 GPU, 8,192 in one batch with chunks of 128": "--batch-size 8192 --contrastive-chunk-size 128 "
                                                     "--mlm-chunk-size 128",
    "1 GPU, 8,192 in one batch with chunks of 32": "--batch-size 8192 --contrastive-chunk-size 32 "
                                                    "--mlm-chunk-size 32",
}
BLOCK = 512  # the CUDA caching allocator's smallest block


class LiveBytes:
    """A dispatch mode that counts every storage an op returns until it is freed, and answers what
    a fake tensor cannot (see the module docstring)."""

    def __init__(self, mask_prob, fake=True):
        from torch.utils._python_dispatch import TorchDispatchMode

        self.mask_prob, self.fake, self.entries, self.current, self.peak = mask_prob, fake, {}, 0, 0
        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return outer.dispatch(func, args, kwargs or {})

        self.mode = Mode()

    def _free(self, key, entry):
        if entry[1] is None:  # already subtracted
            return
        self.current -= entry[1]
        entry[1] = None
        if self.entries.get(key) is entry:
            del self.entries[key]

    def track(self, out):
        import torch
        from torch.utils._pytree import tree_flatten

        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            st = t.untyped_storage()
            key = id(st)
            entry = self.entries.get(key)  # [weakref to the storage, bytes counted]
            if entry is not None and entry[0]() is not st:  # a freed storage's id, reused
                self._free(key, entry)
                entry = None
            if entry is None:
                entry = [None, 0]
                entry[0] = weakref.ref(st, lambda _r, key=key, entry=entry: self._free(key, entry))
                self.entries[key] = entry
            n = math.ceil(st.nbytes() / BLOCK) * BLOCK
            self.current += n - entry[1]  # a known storage may have been resized
            entry[1] = n
        self.peak = max(self.peak, self.current)

    def _masked(self, mask):
        import torch

        # fairseq masks about --mask-prob of each row's tokens
        rows, length = mask.numel() // max(1, mask.size(-1)), mask.size(-1)
        return rows * round(self.mask_prob * length), mask.device, torch.long

    def dispatch(self, func, args, kwargs):
        import torch

        aten = torch.ops.aten
        if self.fake and func is aten._local_scalar_dense.default:
            return False if args[0].dtype == torch.bool else 1
        if self.fake and func is aten.nonzero.default:  # the masked positions
            n, device, dtype = self._masked(args[0])
            out = torch.empty((n, args[0].dim()), dtype=dtype, device=device)
        elif self.fake and func is aten.index.Tensor and any(i is not None and i.dtype == torch.bool
                                                             for i in args[1]):
            index = []  # x[masked] gathers the masked positions
            for i in args[1]:
                if i is not None and i.dtype == torch.bool:
                    n, device, dtype = self._masked(i)
                    index += [torch.zeros(n, dtype=dtype, device=device)] * i.dim()
                else:
                    index.append(i)
            out = func(args[0], index)
        else:
            out = func(*args, **kwargs)
        self.track(out)
        return out


def estimate(arch, tokens, vocab, precision, attention, config, mask_prob=0.15, fake=True, data=None,
             view_tokens=None):
    """{"static_mb", "peak_mb", ...} of one update of ``config`` (fairseq-train options).

    ``data``: a binarized data directory whose dictionary the task uses (else one of ``vocab``
    types). ``fake=False``: the update runs on real CPU tensors (small sizes: it checks the
    estimate), on the task's own batches of ``data``'s train split when ``data`` is given.
    ``view_tokens``: the views' padded length (default ``tokens``; deletions shorten views)."""
    import torch
    from fairseq import optim, options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from torch._subclasses.fake_tensor import FakeTensorMode

    import fairseq_clear

    extra = shlex.split(config)
    with tempfile.TemporaryDirectory() as tmp:
        if data is None:
            with open(os.path.join(tmp, "dict.txt"), "w", encoding="utf-8") as f:
                # the task appends <mask> (and [DEL] when an augmentation deletes) to fairseq's 4 specials
                f.writelines(f"w{i} 1\n" for i in range(vocab - 5))
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(parser, [
            str(data or tmp), "--user-dir", fairseq_clear.__path__[0], "--task", "clear", "--criterion", "clear",
            "--arch", arch, "--tokens-per-sample", str(tokens), "--mask-prob", str(mask_prob),
            "--optimizer", "adam", "--lr", "1e-4", "--dropout", "0.1",
            "--attention-dropout", "0.1" if attention == "math" else "0", *extra])
        cfg = convert_namespace_to_omegaconf(args)
        task = tasks.setup_task(cfg.task)
        own_batches = data is not None and not fake
        if own_batches:
            task.load_dataset("train")
    vocab = len(task.source_dictionary)
    rows, update_freq = cfg.dataset.batch_size, cfg.optimization.update_freq[0]
    live = LiveBytes(mask_prob, fake)
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]

    pad, masked = task.source_dictionary.pad(), round(mask_prob * tokens)
    view_tokens = view_tokens or tokens
    widths = []  # the views' padded lengths of the task's own batches

    def sample(n, first=0):
        if own_batches:  # the task's masking, augmentations, padding and collater
            dataset = task.dataset("train")
            batch = dataset.collater([dataset[(first + i) % len(dataset)] for i in range(n)])
            widths.append(batch["contrastive"]["src_tokens"].size(1))
            return batch
        target = torch.full((n, tokens), pad)  # the assumed share masked, for a real run too
        target[:, 1:1 + masked] = 5
        return {"id": torch.arange(n), "nsentences": n, "ntokens": n * tokens,
                "net_input": {"src_tokens": torch.randint(5, vocab - 2, (n, tokens))}, "target": target,
                "contrastive": {"src_tokens": torch.randint(5, vocab - 2, (2 * n, view_tokens)), "num_anchors": n}}

    def update(samples):
        task.begin_update(len(samples))
        for s in samples:
            task.train_step(s, model, criterion, opt, 1)
        opt.clip_grad_norm(0.0)
        opt.step()
        opt.zero_grad()

    default = torch.get_default_dtype()
    with FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext(), live.mode:
        torch.set_default_dtype(dtype)  # the trainer's model.half(), without swapping fake parameters
        try:
            model = task.build_model(cfg.model)
        finally:
            torch.set_default_dtype(default)
        criterion = task.build_criterion(cfg.criterion)
        params = [p for p in model.parameters() if p.requires_grad]
        if precision == "fp32":
            opt = optim.build_optimizer(cfg.optimizer, params)
        else:  # fairseq-train --fp16 / --bf16: fp32 master weights and their gradients
            cfg.common.fp16, cfg.common.bf16 = precision == "fp16", precision == "bf16"
            cfg.common.fp16_no_flatten_grads = True  # the flat buffer is CUDA-only; the same bytes
            opt = optim.FP16Optimizer.build_optimizer(cfg, params)
        update([sample(2)])  # the optimizer's state is created by the first step
        static = live.current
        live.peak = live.current
        widths.clear()
        update([sample(rows, i * rows) for i in range(update_freq)])
    n_params = sum(p.numel() for p in model.parameters())
    return {"arch": arch, "tokens": tokens, "view_tokens": max(widths) if widths else view_tokens, "vocab": len(task.source_dictionary), "precision": precision,
            "attention": attention, "config": config, "fake_tensors": fake,
            "batches": "the task's own, from " + str(data) if own_batches else "full rows, assumed masked share",
            "sentences_per_update": rows * update_freq,
            "parameters": n_params, "static_mb": static / 2**20, "peak_mb": live.peak / 2**20}


def validate(args):
    """The math-kernel estimate of bench_gradcache --full-step's runs against their measured RSS."""
    measured = common.read_json(common.RESULTS / "gradcache_full_step_block32.json")
    rows = []
    for r in measured["rows"]:
        if "peak_rss_mb" not in r:
            continue
        k = r["chunk"]
        config = f"--batch-size {r['sentences']}" + (f" --contrastive-chunk-size {k} --mlm-chunk-size {k}" if k else "")
        est = estimate(measured["arch"], measured["block"], args.validate_vocab, "fp32", "math", config)
        rows.append({**est, "measured_rss_mb": r["peak_rss_mb"], "rss_minus_estimate_mb": r["peak_rss_mb"] - est["peak_mb"]})
        print(f"{config}: estimate {est['peak_mb']:.0f} MB, measured RSS {r['peak_rss_mb']:.0f} MB", flush=True)
    return {"measured": "benchmarks/results/gradcache_full_step_block32.json (" + measured["command"] + ")",
            "rows": rows}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="clear_roberta_base")
    p.add_argument("--tokens", type=int, default=512, help="tokens per row (the paper's samples: 512)")
    p.add_argument("--vocab", type=int, default=ROBERTA_VOCAB, help="dictionary size (roberta.base: 50,265)")
    p.add_argument("--precision", default="fp16", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--attention", default="fused", choices=["fused", "math"])
    p.add_argument("--config", action="append", help="fairseq-train options of one update (repeatable; "
                   "default: the recipes in RECIPES)")
    p.add_argument("--validate", action="store_true", help="compare with the measured CPU runs instead")
    p.add_argument("--real", action="store_true", help="run the update on real CPU tensors and count the same "
                   "way (small sizes only): checks what the fake tensors assume")
    p.add_argument("--view-tokens", type=int, help="padded length of the contrastive views (default: --tokens, "
                   "an upper bound: deleting augmentations shorten views)")
    p.add_argument("--data", help="a binarized data directory (clear-prepare): the task's dictionary, and with "
                   "--real its train split's batches (the task's own masking, augmentations and padding)")
    p.add_argument("--validate-vocab", type=int, default=8000, help=argparse.SUPPRESS)
    p.add_argument("--out", help="JSON (default: benchmarks/results/memory_estimate.json, "
                   "memory_estimate_validation.json with --validate)")
    args = p.parse_args()
    for name in ("tokens", "vocab", "view_tokens"):
        if getattr(args, name) is not None and getattr(args, name) < 8:
            p.error(f"--{name.replace('_', '-')} must be >= 8")
    if args.view_tokens and args.view_tokens > args.tokens:
        p.error("--view-tokens must be <= --tokens (views are cut to --tokens-per-sample)")
    if args.data and not os.path.isfile(os.path.join(args.data, "dict.txt")):
        p.error(f"--data {args.data}: no dict.txt there (a binarized data directory from clear-prepare)")
    sys.path.insert(0, str(REPO))
    start = time.perf_counter()
    if args.validate:
        result = validate(args)
        out = args.out or common.RESULTS / "memory_estimate_validation.json"
    else:
        configs = {c: c for c in args.config} if args.config else RECIPES
        rows = []
        for name, config in configs.items():
            rows.append({"name": name, **estimate(args.arch, args.tokens, args.vocab, args.precision,
                                                  args.attention, config, fake=not args.real, data=args.data,
                                                  view_tokens=args.view_tokens)})
            print(f"{name}: {rows[-1]['peak_mb'] / 1024:.1f} GiB peak "
                  f"({rows[-1]['static_mb'] / 1024:.1f} GiB weights, gradients and Adam)", flush=True)
        result = {"rows": rows}
        out = args.out or common.RESULTS / "memory_estimate.json"
    result = {"command": " ".join(["python", "benchmarks/studies/estimate_memory.py"] + sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "seconds": time.perf_counter() - start, **result}
    common.write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
