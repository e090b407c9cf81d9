"""GradCache: peak memory and time of one contrastive forward+backward, with and without chunks.

    python benchmarks/bench_gradcache.py [--sizes 256,1024,4096] [--chunk 128] [--arch clear_roberta_small]

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

REPO = Path(__file__).resolve().parents[1]


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="256,1024,4096")
    p.add_argument("--chunk", type=int, default=128)
    p.add_argument("--arch", default="clear_roberta_small")
    p.add_argument("--one", nargs=2, type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "gradcache.json"))
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.arch)))
        return
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        for chunk in (0, args.chunk):
            out = subprocess.run([sys.executable, __file__, "--one", str(n), str(chunk), "--arch", args.arch],
                                 capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
            if out.returncode != 0:
                rows.append({"sentences": n, "chunk": chunk, "error": out.stderr.strip().splitlines()[-1]})
            else:
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"arch": args.arch, "rows": rows}, indent=2) + "\n")
    print(f"\n| sentences | peak MB (no chunks) | peak MB (chunks of {args.chunk}) | s (no chunks) | s (chunks) |")
    print("|---|---|---|---|---|")
    for n in sorted({r["sentences"] for r in rows}):
        a = next(r for r in rows if r["sentences"] == n and r["chunk"] == 0)
        b = next(r for r in rows if r["sentences"] == n and r["chunk"] != 0)
        fmt = lambda r, k: f"{r[k]:.0f}" if k in r and k == "peak_mb" else (f"{r[k]:.2f}" if k in r else r.get("error", "?"))  # noqa: E731
        print(f"| {n} | {fmt(a, 'peak_mb')} | {fmt(b, 'peak_mb')} | {fmt(a, 'seconds')} | {fmt(b, 'seconds')} |")


if __name__ == "__main__":
    main()
