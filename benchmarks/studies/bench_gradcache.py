"""GradCache: peak memory and time of one contrastive forward+backward, with and without chunks.

    python benchmarks/studies/bench_gradcache.py [--sizes 256,1024,4096] [--chunk 128] [--arch clear_roberta_small]
    python benchmarks/studies/bench_gradcache.py --full-step [--sizes 128,512] [--chunk 64] [--block 64] [--updates 3]

``--full-step``: whole training updates through fairseq-train (benchmarks/fairseq_train_timed.py:
MLM + NT-Xent, Adam), N sentences per update from the shared wiki1m sample (the bench_embed
vocabulary), without chunks and with ``--contrastive-chunk-size K --mlm-chunk-size K``; peak
RSS of each run and the median update time after the first. Writes gradcache_full_step.json.
With ``--block L`` the rows are fairseq's blocks of exactly L tokens, so every batch is padded
to the same length and the memory of different batch sizes is comparable.

Each configuration runs in its own process (peak RSS = ru_maxrss of that process, minus the
RSS after the model is built, so the interpreter and torch are not counted). NT-Xent over N
sentences (2N views of 30 random tokens + <s>, </s>), dropout on, fp32, CPU threads = 2.
Writes benchmarks/results/gradcache.json and prints a table.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]  # benchmarks/: common.py, bench_embed.py
REPO = BENCH.parent


def one(n, chunk, arch):
    import torch
    from fairseq.data import Dictionary

    sys.path.insert(0, str(REPO))
    import fairseq_clear  # noqa: F401
    from fairseq_clear import losses
    from fairseq_clear.gradcache import cached_encode
    from fairseq_clear.models.clear_roberta import ClearRobertaModel
    from fairseq.models import ARCH_CONFIG_REGISTRY

    torch.set_num_threads(2)
    d = Dictionary()
    for i in range(1000):
        d.add_symbol(f"w{i}")
    d.add_symbol("<mask>")

    class Task:
        source_dictionary = target_dictionary = d
        is_contrastive = True

        def max_positions(self):
            return 64

    args = argparse.Namespace(tokens_per_sample=64, max_positions=64, dropout=0.1, attention_dropout=0.1)
    ARCH_CONFIG_REGISTRY[arch](args)
    model = ClearRobertaModel.build_model(args, Task()).train()
    torch.manual_seed(0)
    src = torch.randint(4, 1000, (2 * n, 32))
    src[:, 0], src[:, -1] = 0, 2
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    z = cached_encode(lambda s: model(s, contrastive=True)[0], src, chunk, model.parameters())
    loss, _ = losses.nt_xent(z[:n], z[n:], 0.1)
    loss.backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"sentences": n, "chunk": chunk, "seconds": seconds, "peak_mb": (peak - base) / 1024}


def whole_corpus(work, data, corpus):
    """bench_embed binarizes 2,000 lines; blocks of one length for large batches need all of them
    (same sentencepiece model and dictionary)."""
    import sentencepiece as spm

    sys.path.insert(0, str(BENCH))
    import common

    out = work / "whole_corpus"
    if (out / "train.bin").is_file():
        return out
    sp = spm.SentencePieceProcessor(model_file=str(data / "sentencepiece.model"))
    with open(work / "whole.spm", "w", encoding="utf-8") as f:
        for line in Path(corpus).read_text(encoding="utf-8").splitlines():
            if line.strip():
                f.write(" ".join(sp.encode(line.strip(), out_type=str)) + "\n")
    common.run([str(Path(sys.executable).parent / "fairseq-preprocess"), "--only-source", "--srcdict",
                data / "dict.txt", "--trainpref", work / "whole.spm", "--validpref", work / "whole.spm",
                "--destdir", out, "--workers", "1"], work / "whole_corpus.log", threads=2)
    return out


def full_step(sizes, chunk, arch, out, max_unchunked=None, block=0, updates=3, mmap_threshold=0):
    sys.path.insert(0, str(BENCH))
    import bench_embed
    import common

    work = common.RUNS / "gradcache_full_step"
    data, _ = bench_embed.build_model(work, bench_embed.DEFAULT_CORPUS, 8000, 2)
    if block:
        data = whole_corpus(work, data, bench_embed.DEFAULT_CORPUS)
        lines = sum(1 for _ in open(work / "whole.spm", encoding="utf-8"))
        print(f"--block {block}: the whole corpus ({lines} lines) binarized in {data}", flush=True)
    rows = []
    for n in sizes:
        for k in (0, chunk):
            if k == 0 and max_unchunked is not None and n > max_unchunked:
                rows.append({"sentences": n, "chunk": 0, "skipped": f"above --max-unchunked {max_unchunked}"})
                continue
            res_path = work / f"n{n}_k{k}.json"
            chunks = ["--contrastive-chunk-size", k, "--mlm-chunk-size", k] if k else []
            # --block L: rows are fairseq's blocks of exactly L tokens, so every batch pads to one length
            rows_of = ["--sample-break-mode", "none", "--tokens-per-sample", block] if block else \
                ["--tokens-per-sample", "128"]
            cmd = [sys.executable, common.TIMED_TRAIN, "--bench-out", res_path, data, "--user-dir", common.USER_DIR,
                   "--task", "clear", "--criterion", "clear", "--arch", arch, "--augmentations", "del-span,reorder",
                   *rows_of, "--batch-size", n, "--required-batch-size-multiple", 1,
                   "--optimizer", "adam", "--lr", "1e-5", "--max-update", updates, "--cpu", "--num-workers", "0",
                   "--disable-validation", "--no-save", "--save-dir", work / "no_save", "--seed", "1",
                   "--log-format", "json", *chunks]
            # glibc's default mmap threshold grows with the largest block freed, after which freed
            # activations stay in the heap: peak RSS then grows with the batch although live memory does not
            malloc = {"MALLOC_MMAP_THRESHOLD_": str(mmap_threshold)} if mmap_threshold else None
            common.run(cmd, work / f"n{n}_k{k}.log", threads=2, extra_env=malloc)
            res = common.read_json(res_path)
            recs = res["records"]
            rows.append({"sentences": n, "chunk": k, "peak_rss_mb": res["peak_rss_mb"],
                         "update_s": common.median([r["step_s"] for r in recs[1:]]),
                         "sentences_per_update": [r["sentences"] for r in recs],
                         # rows are padded to the batch's longest: memory per chunk grows with it
                         "padded_length_per_update": [r["s_padded"] // max(1, r["sentences"]) for r in recs]})
            print(rows[-1], flush=True)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"command": " ".join(["python", "benchmarks/studies/bench_gradcache.py"] + sys.argv[1:]),
                                     "arch": arch, "mode": "full-step", "block": block,
                                     "malloc_mmap_threshold": mmap_threshold or "glibc default",
                                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                     "loadavg_at_end": os.getloadavg(), "rows": rows}, indent=2) + "\n")
    print(f"\n| sentences | peak RSS MB (no chunks) | peak RSS MB (chunks of {chunk}) | s/update (no chunks) | s/update (chunks) |")
    print("|---|---|---|---|---|")
    for n in sizes:
        a, b = (next(r for r in rows if r["sentences"] == n and (r["chunk"] != 0) == c) for c in (False, True))
        cell = lambda r, k, f: f"{r[k]:{f}}" if k in r else r["skipped"]  # noqa: E731
        print(f"| {n} | {cell(a, 'peak_rss_mb', '.0f')} | {b['peak_rss_mb']:.0f} | {cell(a, 'update_s', '.2f')} "
              f"| {b['update_s']:.2f} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="256,1024,4096")
    p.add_argument("--chunk", type=int, default=128)
    p.add_argument("--arch", default="clear_roberta_small")
    p.add_argument("--one", nargs=2, type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "gradcache.json"))
    p.add_argument("--full-step", action="store_true", help="whole fairseq-train updates with MLM (see above)")
    p.add_argument("--max-unchunked", type=int, help="skip the run without chunks above this size (it would "
                   "not fit in memory: about 12.7 GB per 1,024 sentences here)")
    p.add_argument("--block", type=int, default=0, help="--full-step: rows are blocks of exactly this many "
                   "tokens (--sample-break-mode none), so memory is compared at one padded length")
    p.add_argument("--malloc-mmap-threshold", type=int, default=0, help="--full-step: MALLOC_MMAP_THRESHOLD_ "
                   "for the runs (e.g. 131072), so that peak RSS counts live memory rather than glibc's heap "
                   "fragmentation (default: glibc's own, growing threshold)")
    p.add_argument("--updates", type=int, default=3, help="--full-step: updates per run (the first is not timed)")
    args = p.parse_args()
    if args.updates < 2:
        p.error("--updates must be >= 2 (the first update is not timed)")
    if args.block < 0:
        p.error("--block must be >= 0")
    if args.full_step:
        out = args.out if "--out" in sys.argv else str(REPO / "benchmarks" / "results" / "gradcache_full_step.json")
        full_step([int(x) for x in args.sizes.split(",")], args.chunk, args.arch, out, args.max_unchunked,
                  args.block, args.updates, args.malloc_mmap_threshold)
        return
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.arch)))
        return
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        for chunk in (0, args.chunk):
            if chunk == 0 and args.max_unchunked is not None and n > args.max_unchunked:
                rows.append({"sentences": n, "chunk": 0, "skipped": f"above --max-unchunked {args.max_unchunked}"})
                print(rows[-1], flush=True)
                continue
            out = subprocess.run([sys.executable, __file__, "--one", str(n), str(chunk), "--arch", args.arch],
                                 capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
            if out.returncode != 0:
                rows.append({"sentences": n, "chunk": chunk, "error": out.stderr.strip().splitlines()[-1]})
            else:
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"command": " ".join(["python", "benchmarks/studies/bench_gradcache.py"] + sys.argv[1:]),
                                          "arch": args.arch, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                          "loadavg_at_end": os.getloadavg(), "rows": rows}, indent=2) + "\n")
    print(f"\n| sentences | peak MB (no chunks) | peak MB (chunks of {args.chunk}) | s (no chunks) | s (chunks) |")
    print("|---|---|---|---|---|")
    for n in sorted({r["sentences"] for r in rows}):
        a = next(r for r in rows if r["sentences"] == n and r["chunk"] == 0)
        b = next(r for r in rows if r["sentences"] == n and r["chunk"] != 0)
        fmt = lambda r, k: f"{r[k]:.0f}" if k in r and k == "peak_mb" else (  # noqa: E731
            f"{r[k]:.2f}" if k in r else r.get("error") or r.get("skipped", "?"))
        print(f"| {n} | {fmt(a, 'peak_mb')} | {fmt(b, 'peak_mb')} | {fmt(a, 'seconds')} | {fmt(b, 'seconds')} |")


if __name__ == "__main__":
    main()
