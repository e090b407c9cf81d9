"""The GPU benchmark: training throughput and memory at the paper's 512-token samples, the largest
contrastive batch per device with and without GradCache, and embed() against sentence-transformers.

    python benchmarks/studies/bench_gpu.py                      # on a CUDA machine: clear_roberta_base, fp16 and bf16
    python benchmarks/studies/bench_gpu.py --small --device cpu # the same code at toy size (CI keeps it working)

Parts (each a real run of the plugin's code on ``--device``):

1. ``fairseq-train`` (through benchmarks/fairseq_train_timed.py, which times every
   ``Trainer.train_step``) of fairseq's ``masked_lm`` and of ``--task clear`` (``--augmentations``,
   default del-span,reorder) on the same blocks of ``--tokens-per-sample`` tokens
   (``--sample-break-mode complete``, the paper's unit), same model shape, sentences per update and
   seed, under each of ``--precisions`` (fp16, bf16 on CUDA; fp32 or bf16 on CPU) and each of
   ``--num-workers`` (fairseq's data-loader processes, which build CLEAR's views off the main
   process; default 0): tokens of s per second,
   peak device memory, and the time ratio clear / masked_lm next to the token floor
   (tokens of s + views) / tokens of s counted on the same batches;
2. the largest NT-Xent batch (sentences, two views each, forward + backward, dropout on) that fits,
   doubling from ``--batch-start`` up to ``--batch-max``, without chunks and with
   ``--contrastive-chunk-size`` ``--chunk``;
3. sentences/s of the hub's ``embed()`` against sentence-transformers' ``encode()`` of the same
   model exported with clear-export-hf, on the device;

and whether apex (fused layer norm / Adam) is importable. Without CUDA the run says so in its
output and JSON (``"cuda": false``): its numbers are then CPU numbers of the small form, not GPU
ones. Writes benchmarks/results/gpu.json (``--out``).
"""

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
import common  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # part 3 loads only the local export
SHAPES = {"base": (12, 768, 12), "small": (1, 32, 2)}


def apex_status():
    try:
        from fairseq.modules.layer_norm import has_fused_layernorm
    except ImportError:
        has_fused_layernorm = False
    return {"apex_importable": importlib.util.find_spec("apex") is not None,
            "fairseq_fused_layer_norm": bool(has_fused_layernorm)}


def train_args(data, shape, tokens, batch, updates, device, precision, work, num_workers=0):
    layers, dim, heads = shape
    args = [data, "--sample-break-mode", "complete", "--tokens-per-sample", tokens, "--max-positions", tokens,
            "--encoder-layers", layers, "--encoder-embed-dim", dim, "--encoder-ffn-embed-dim", 4 * dim,
            "--encoder-attention-heads", heads, "--batch-size", batch, "--required-batch-size-multiple", 1,
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "1e-4", "--max-update", updates,
            "--num-workers", num_workers, "--seed", "1", "--disable-validation", "--no-save",
            "--save-dir", work / "no_save",  # else fairseq would resume from ./checkpoints if it exists
            "--log-format", "json", "--log-interval", "1000"]
    if device == "cpu":
        args.append("--cpu")
    args += {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}[precision]
    return args


def throughput(args, work, device):
    shape = SHAPES["small" if args.small else "base"]
    tasks = {
        # --user-dir for the baseline too: fairseq's task and criterion, with the plugin's fairseq
        # fixes (without them fairseq-train --bf16 means --tpu and fails importing torch_xla)
        "masked_lm": ["--user-dir", common.USER_DIR, "--task", "masked_lm", "--criterion", "masked_lm",
                      "--arch", "roberta"],
        "clear": ["--user-dir", common.USER_DIR, "--task", "clear", "--criterion", "clear",
                  "--arch", "clear_roberta", "--augmentations", args.augmentations],
    }
    rows = []
    for precision, num_workers in [(p, w) for p in args.precisions.split(",") for w in args.num_workers]:
        runs = {}
        for name, task_args in tasks.items():
            out = work / f"{name}.{precision}.w{num_workers}.json"
            cmd = [sys.executable, common.TIMED_TRAIN, "--bench-out", out,
                   *train_args(args.data, shape, args.tokens_per_sample, args.batch_size,
                               args.warmup + args.updates, device, precision, work, num_workers), *task_args]
            common.run(cmd, work / f"{name}.{precision}.w{num_workers}.log", threads=args.threads)
            res = common.read_json(out)
            timed = res["records"][args.warmup:]
            seconds = sum(r["step_s"] for r in timed)
            s_tokens = sum(r["s_tokens"] for r in timed)
            runs[name] = {"tokens_per_s": s_tokens / seconds if seconds else None, "seconds": seconds,
                          "s_tokens": s_tokens, "views_tokens": sum(r["views_tokens"] for r in timed),
                          "peak_device_mb": res.get("peak_device_mb"), "peak_rss_mb": res["peak_rss_mb"],
                          "updates": len(timed)}
        clear, mlm = runs["clear"], runs["masked_lm"]
        row = {"precision": precision, "num_workers": num_workers, **{f"{k}_{n}": v for n, r in runs.items() for k, v in r.items()},
               "time_ratio": clear["seconds"] / mlm["seconds"] if mlm["seconds"] else None,
               "token_floor": (clear["s_tokens"] + clear["views_tokens"]) / max(clear["s_tokens"], 1)}
        rows.append(row)
        print(f"{precision}, {num_workers} loader workers: masked_lm {mlm['tokens_per_s']:.0f} tok/s, clear {clear['tokens_per_s']:.0f} tok/s, "
              f"ratio {row['time_ratio']:.2f} (floor {row['token_floor']:.2f}), peak device MB "
              f"{mlm['peak_device_mb']} / {clear['peak_device_mb']}", flush=True)
    return rows


def _contrastive_step(model, n, chunk, tokens, device, precision, vocab):
    import torch

    from fairseq_clear import losses
    from fairseq_clear.gradcache import cached_encode

    src = torch.randint(4, vocab, (2 * n, tokens), device=device)
    src[:, 0], src[:, -1] = 0, 2
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    model.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device.split(":")[0], dtype=dtype, enabled=dtype is not None):
        z = cached_encode(lambda s: model(s, contrastive=True)[0], src, chunk, model.parameters())
        loss, _ = losses.nt_xent(z[:n].float(), z[n:].float(), 0.1)
    loss.backward()


def largest_batch(args, device):
    """{precision: {chunk: largest n that fit, or the cap}} by doubling."""
    import torch
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_CONFIG_REGISTRY

    import fairseq_clear  # noqa: F401
    from fairseq_clear.models.clear_roberta import ClearRobertaModel

    vocab = 1000
    d = Dictionary()
    for i in range(vocab):
        d.add_symbol(f"w{i}")
    d.add_symbol("<mask>")
    tokens = int(args.tokens_per_sample)

    class Task:
        source_dictionary = target_dictionary = d
        is_contrastive = True

        def max_positions(self):
            return tokens

    layers, dim, heads = SHAPES["small" if args.small else "base"]
    margs = argparse.Namespace(tokens_per_sample=tokens, max_positions=tokens, dropout=0.1, attention_dropout=0.1,
                               encoder_layers=layers, encoder_embed_dim=dim, encoder_ffn_embed_dim=4 * dim,
                               encoder_attention_heads=heads)
    ARCH_CONFIG_REGISTRY["clear_roberta"](margs)
    model = ClearRobertaModel.build_model(margs, Task()).to(device).train()
    out = {}
    for precision in args.precisions.split(","):
        out[precision] = {}
        for chunk in (0, args.chunk):
            n, best, stopped = args.batch_start, None, "cap"
            while n <= args.batch_max:
                try:
                    _contrastive_step(model, n, chunk, tokens, device, precision, vocab)
                    best = n
                    n *= 2
                except torch.cuda.OutOfMemoryError:
                    stopped = "out of memory"
                    break
                finally:
                    if device.startswith("cuda"):
                        torch.cuda.empty_cache()
            out[precision][str(chunk)] = {"largest_sentences": best, "stopped_by": stopped}
            print(f"{precision} chunk {chunk or 'none'}: largest contrastive batch {best} sentences ({stopped})",
                  flush=True)
    return out


def embed_speed(args, work, device):
    """embed() vs sentence-transformers encode() of the same exported model, sentences/s."""
    import numpy as np
    import torch

    from fairseq_clear.export.hf import CHECK_SENTENCES, export
    from fairseq_clear.models import ClearRobertaModel

    layers, dim, heads = SHAPES["small" if args.small else "base"]
    save = work / "embed_ckpt"
    common.run([common.bin_path("fairseq-train"), args.data, "--user-dir", common.USER_DIR, "--task", "clear",
                "--criterion", "clear", "--arch", "clear_roberta", "--encoder-layers", layers,
                "--encoder-embed-dim", dim, "--encoder-ffn-embed-dim", 4 * dim, "--encoder-attention-heads", heads,
                "--tokens-per-sample", args.tokens_per_sample, "--max-positions", args.tokens_per_sample,
                "--batch-size", "4", "--optimizer", "adam", "--lr", "1e-5", "--max-update", "1", "--cpu",
                "--save-dir", save, "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints"],
               work / "embed_train.log", threads=args.threads)
    hub = ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(args.data))
    st = export(hub, str(work / "exported"), pooling="cls", overwrite=True, check_sentences=CHECK_SENTENCES)
    sentences = [line for line in Path(args.sentences).read_text(encoding="utf-8").splitlines() if line.strip()]
    sentences = sentences[: args.embed_sentences]
    rows = {}
    for precision in args.precisions.split(","):
        st_model = st.to(device)
        if precision != "fp32":
            st_model = st_model.to(dtype={"fp16": torch.float16, "bf16": torch.bfloat16}[precision])
        for _ in range(2):  # warm-up, then timed
            start = time.perf_counter()
            ours = hub.embed(sentences, pooling="cls", batch_size=64, device=device, precision=precision)
            t_ours = time.perf_counter() - start
            start = time.perf_counter()
            theirs = st_model.encode(sentences, batch_size=64, convert_to_numpy=True, device=device)
            t_st = time.perf_counter() - start
        st_model.float()
        rows[precision] = {"embed_sent_per_s": len(sentences) / t_ours, "st_encode_sent_per_s": len(sentences) / t_st,
                           "ratio": t_st / t_ours, "max_abs_diff": float(np.abs(ours - theirs).max()),
                           "sentences": len(sentences)}
        print(f"{precision}: embed() {rows[precision]['embed_sent_per_s']:.0f} sent/s, encode() "
              f"{rows[precision]['st_encode_sent_per_s']:.0f} sent/s, ratio {rows[precision]['ratio']:.2f}", flush=True)
    return rows


def main():
    import torch

    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if cuda else "cpu")
    p.add_argument("--small", action="store_true", help="toy model and sizes (CPU smoke form)")
    p.add_argument("--data", help="binarized data directory with sentencepiece.model "
                   "(default: the benchmark corpus, built on first use)")
    p.add_argument("--sentences", default=str(common.STS_DIR / "STSBenchmark" / "sts-test.csv"),
                   help="text for part 3, one sentence per line (STS-B csv lines are split on tabs)")
    p.add_argument("--precisions", help="comma-separated: fp32, fp16, bf16 (default: fp16,bf16 on CUDA, fp32 on CPU; "
                   "fp16 needs CUDA)")
    p.add_argument("--tokens-per-sample", type=int, help="block length (default: 512, the paper's; --small: 64)")
    p.add_argument("--batch-size", type=int, help="blocks per update (default 16; --small: 4)")
    p.add_argument("--augmentations", default="del-span,reorder")
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--chunk", type=int, default=64, help="--contrastive-chunk-size for part 2")
    p.add_argument("--batch-start", type=int, default=32)
    p.add_argument("--batch-max", type=int, default=16384, help="largest batch tried in part 2")
    p.add_argument("--embed-sentences", type=int, default=5000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--num-workers", default="0", help="comma-separated fairseq --num-workers for part 1 "
                   "(data-loader processes; default 0: the views are built in the main process)")
    p.add_argument("--parts", default="train,batch,embed")
    p.add_argument("--out", default=str(common.RESULTS / "gpu.json"))
    args = p.parse_args()
    if args.device.startswith("cuda") and not cuda:
        sys.exit("--device cuda: no CUDA device is visible (pass --device cpu for the small CPU form)")
    on_gpu = args.device.startswith("cuda")
    args.precisions = args.precisions or ("fp16,bf16" if on_gpu else "fp32")
    unknown = set(args.precisions.split(",")) - {"fp32", "fp16", "bf16"}
    if unknown:
        sys.exit(f"--precisions: unknown {', '.join(sorted(unknown))} (fp32, fp16, bf16)")
    if not on_gpu and "fp16" in args.precisions.split(","):
        sys.exit("--precisions: fp16 training (fairseq-train --fp16) needs CUDA; use fp32 or bf16 on CPU")
    try:
        args.num_workers = [int(w) for w in args.num_workers.split(",")]
    except ValueError:
        sys.exit(f"--num-workers: comma-separated whole numbers, not '{args.num_workers}'")
    if min(args.num_workers) < 0:
        sys.exit(f"--num-workers: at least 0, not '{min(args.num_workers)}'")
    args.tokens_per_sample = args.tokens_per_sample or (64 if args.small else 512)
    args.batch_size = args.batch_size or (4 if args.small else 16)
    if not on_gpu:
        print("no CUDA device: running on CPU; these are not GPU numbers", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench_gpu_", dir=common.RUNS if common.RUNS.is_dir() else None))
    if args.data is None:
        args.data = str(common.prepare_corpus(work / "logs")["documents_bin"])
    if not args.sentences.endswith(".txt"):
        lines = [x.split("\t") for x in Path(args.sentences).read_text(encoding="utf-8").splitlines()]
        text = work / "sentences.txt"
        text.write_text("\n".join(f[5] for f in lines if len(f) > 6) + "\n", encoding="utf-8")
        args.sentences = str(text)
    parts = set(args.parts.split(","))
    result = {"command": " ".join(["python", "benchmarks/studies/bench_gpu.py"] + sys.argv[1:]), "cuda": on_gpu,
              "device": torch.cuda.get_device_name(0) if on_gpu else "cpu", "small": args.small,
              "shape": dict(zip(("layers", "dim", "heads"), SHAPES["small" if args.small else "base"])),
              "tokens_per_sample": args.tokens_per_sample, "batch_size": args.batch_size,
              "precisions": args.precisions.split(","), **apex_status(), "machine": common.machine()}
    if "train" in parts:
        result["train"] = throughput(args, work, args.device)
    if "batch" in parts:
        result["largest_contrastive_batch"] = largest_batch(args, args.device)
    if "embed" in parts:
        result["embed"] = embed_speed(args, work, args.device)
    common.write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
