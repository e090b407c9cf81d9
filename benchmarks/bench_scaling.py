"""1 rank against 2 ranks (gloo, CPU) with the same global batch (issue 6, part 4).

    python benchmarks/bench_scaling.py [--quick]

* Equivalence: ``fairseq-train`` on 1 rank with ``--batch-size 2B`` and under
  ``torchrun --nproc_per_node 2 ... --distributed-backend gloo`` with ``--batch-size B``.
  fairseq shards an epoch's batches round-robin (rank r takes batches r, r+2, ...),
  so with the first epoch unshuffled (``--curriculum 1``) update k holds batches 2k
  and 2k+1 of size B on the two ranks, exactly the sentences of batch k of size 2B
  on one rank. Masks and views are keyed by sentence index, not by rank; dropout
  is 0; the check uses the training sentences of 30 tokens, so that the unshuffled
  first batches are random sentences, not the shortest. The losses of the first updates must agree within 1e-5 — with negatives
  gathered across ranks (``--gather-negatives auto``). With ``--gather-negatives
  off`` each rank only contrasts its own B sentences, so its loss differs: the
  number of negatives per anchor is 2·2B-2 gathered against 2B-2 local.
* Throughput: sentences/s of the same global batch on 1 rank x 1 thread,
  1 rank x 2 threads and 2 ranks x 1 thread (shuffled batches, after warm-up).

Writes benchmarks/results/scaling.json.
"""

import argparse
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

TOLERANCE = 1e-5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_args(data, batch, updates, extra):
    return [
        data, "--user-dir", common.USER_DIR, "--task", "clear", "--criterion", "clear",
        "--augmentations", "del-word", "--arch", "clear_roberta",
        "--encoder-layers", 4, "--encoder-embed-dim", 128, "--encoder-ffn-embed-dim", 512,
        "--encoder-attention-heads", 4, "--tokens-per-sample", common.TOKENS_PER_SAMPLE,
        "--max-positions", common.TOKENS_PER_SAMPLE, "--required-batch-size-multiple", 1,
        "--batch-size", batch, "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6",
        "--lr", "1e-3", "--lr-scheduler", "polynomial_decay", "--warmup-updates", 5,
        "--total-num-update", 100, "--max-update", updates, "--cpu", "--num-workers", 0, "--seed", 1,
        "--disable-validation", "--no-save", "--log-format", "json", "--log-interval", 1000, *extra,
    ]


def run(name, ranks, threads, args, work):
    out = work / f"{name}.rank{{rank}}.json"
    if ranks == 1:
        cmd = [sys.executable, common.TIMED_TRAIN, "--bench-out", out, *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", ranks,
               "--master_addr", "127.0.0.1", "--master_port", free_port(),
               common.TIMED_TRAIN, "--bench-out", out, *args, "--distributed-backend", "gloo"]
    common.run(cmd, work / "logs" / f"{name}.log", threads=threads)
    return [common.read_json(str(out).replace("{rank}", str(r))) for r in range(ranks)]


def throughput(result, warmup):
    recs = result[0]["records"][warmup:]
    seconds = sum(r["step_s"] + (r["gap_s"] or 0) for r in recs)
    sentences = sum(sum(res["records"][k]["sentences"] for res in result) for k in range(warmup, len(result[0]["records"])))
    return sentences / seconds, common.median([r["step_s"] + (r["gap_s"] or 0) for r in recs])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch-size", type=int, default=16, help="B: sentences per rank (1 rank: 2B)")
    parser.add_argument("--check-updates", type=int, default=5)
    parser.add_argument("--speed-updates", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=str(common.RESULTS / "scaling.json"))
    args = parser.parse_args()
    if args.quick:
        args.check_updates, args.speed_updates = 3, 8
    data = common.prepare_corpus(common.RUNS / "logs")["sentences_bin"]
    check_data = common.equal_length_corpus(30)
    work = common.RUNS / "scaling"
    B = args.batch_size
    exact = ["--curriculum", 1, "--dropout", 0, "--attention-dropout", 0, "--activation-dropout", 0]
    one = run("check_1rank", 1, 1, base_args(check_data, 2 * B, args.check_updates, exact), work)
    two = run("check_2ranks_gather", 2, 1, base_args(check_data, B, args.check_updates, exact), work)
    local = run("check_2ranks_local", 2, 1,
                base_args(check_data, B, args.check_updates, exact + ["--gather-negatives", "off"]), work)
    keys = ("loss", "mlm_loss", "cl_loss", "cl_acc")
    rows = []
    for k in range(args.check_updates):
        a, b, c = one[0]["records"][k], two[0]["records"][k], local[0]["records"][k]
        # the id sums (a fingerprint of the batch) of the two ranks add up to the single rank's
        same_sentences = sum(a["ids"]) == sum(b["ids"]) + sum(two[1]["records"][k]["ids"])
        row = {"update": k + 1, "sentences_1rank": a["sentences"],
               "sentences_2ranks": b["sentences"] + two[1]["records"][k]["sentences"],
               "same_sentences": bool(same_sentences)}
        for key in keys:
            if key in a and key in b:
                row[f"{key}_1rank"] = a[key]
                row[f"{key}_2ranks"] = b[key]
                row[f"{key}_abs_diff"] = abs(a[key] - b[key])
            if key in c:
                row[f"{key}_2ranks_local"] = c[key]
        # contrastive rows each anchor is compared with (its positive included): 2N-1 of which 2N-2 negatives
        row["negatives_per_anchor_gathered"] = 2 * (b["sentences"] + two[1]["records"][k]["sentences"]) - 2
        row["negatives_per_anchor_local"] = 2 * c["sentences"] - 2
        rows.append(row)
    max_diff = max(max(r.get(f"{k}_abs_diff", 0) for k in ("loss", "mlm_loss", "cl_loss")) for r in rows)
    speed = {}
    for name, ranks, threads, batch in (("1 rank x 1 thread", 1, 1, 2 * B), ("1 rank x 2 threads", 1, 2, 2 * B),
                                        ("2 ranks x 1 thread", 2, 1, B)):
        slug = name.replace(" ", "_")
        res = run(f"speed_{slug}", ranks, threads,
                  base_args(data, batch, args.warmup + args.speed_updates, []), work)
        rate, med = throughput(res, args.warmup)
        speed[name] = {"sentences_per_s": round(rate, 1), "median_update_s": round(med, 4),
                       "global_batch": 2 * B, "peak_rss_mb_per_rank": [round(r["peak_rss_mb"], 1) for r in res]}
        print(f"{name:20s} {rate:8.1f} sentences/s (median update {med:.3f} s)", flush=True)
    base = speed["1 rank x 1 thread"]["sentences_per_s"]
    for s in speed.values():
        s["speedup_vs_1_rank_1_thread"] = round(s["sentences_per_s"] / base, 3)
    result = {
        "command": " ".join(["python", "benchmarks/bench_scaling.py"] + sys.argv[1:]),
        "model": "clear_roberta 4 layers x 128, del-word",
        "per_rank_batch": B, "global_batch": 2 * B,
        "equivalence": {"updates": rows, "max_abs_loss_difference": max_diff, "tolerance": TOLERANCE,
                        "met": bool(max_diff <= TOLERANCE and all(r["same_sentences"] for r in rows))},
        "throughput": speed,
        "machine": common.machine(),
    }
    common.write_json(args.out, result)
    print(f"{'update':>6s} {'loss 1 rank':>14s} {'loss 2 ranks':>14s} {'|diff|':>9s} {'2 ranks local':>14s} "
          f"{'negatives gathered/local':>25s}")
    for r in rows:
        print(f"{r['update']:6d} {r['loss_1rank']:14.7f} {r['loss_2ranks']:14.7f} {r['loss_abs_diff']:9.2e} "
              f"{r.get('loss_2ranks_local', float('nan')):14.7f} "
              f"{r['negatives_per_anchor_gathered']:>12d} / {r['negatives_per_anchor_local']:<12d}")
    print(f"max |difference| {max_diff:.2e} (tolerance {TOLERANCE}) -> "
          f"{'met' if result['equivalence']['met'] else 'NOT met'}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
