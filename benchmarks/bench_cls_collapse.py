"""Why [CLS]-pooled contrastive learning stalls in small from-scratch runs (issue 6, part 3).

    python benchmarks/bench_cls_collapse.py [--quick]

In short from-scratch runs the contrastive accuracy of CLEAR (del-word, [CLS] pooling)
stays at chance (1 / (2N-1)) for hundreds of updates. This measures, for the
benchmark's model shape:

* the mean pairwise cosine similarity of the [CLS] vectors and of the mean-pooled
  vectors of 64 training sentences at initialisation (RoBERTa's init: N(0, 0.02));
* the contrastive accuracy over the updates of fairseq's Trainer with ``--task clear
  --mlm off`` (NT-Xent alone, so that the MLM loss plays no part) for a few settings:
  learning rate, τ, warm-up, model width, pooling, and more updates.

Writes benchmarks/results/cls_collapse.json.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

# name, overrides (dim, lr, tau, warmup, pooling), updates
SETTINGS = [
    ("[CLS], lr 1e-3, τ 0.1 (reference)", {}, 1.0),
    ("[CLS], lr 3e-3", {"lr": "3e-3"}, 1.0),
    ("[CLS], lr 1e-2", {"lr": "1e-2"}, 1.0),
    ("[CLS], τ 0.05", {"tau": "0.05"}, 1.0),
    ("[CLS], no warm-up", {"warmup": 0}, 1.0),
    ("[CLS], 256 wide", {"dim": 256}, 1.0),
    ("[CLS], 3x the updates", {}, 3.0),
    ("mean pooling", {"pooling": "mean"}, 1.0),
]
QUICK = [0, 7]


def trainer_for(data, dim, lr, tau, warmup, pooling, updates, batch, layers, seed=1):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    argv = [data, "--user-dir", common.USER_DIR, "--task", "clear", "--criterion", "clear",
            "--augmentations", "del-word", "--mlm", "off", "--temperature", tau, "--sentence-pooling", pooling,
            "--arch", "clear_roberta", "--encoder-layers", layers, "--encoder-embed-dim", dim,
            "--encoder-ffn-embed-dim", 4 * dim, "--encoder-attention-heads", 4,
            "--tokens-per-sample", common.TOKENS_PER_SAMPLE, "--max-positions", common.TOKENS_PER_SAMPLE,
            "--batch-size", batch, "--required-batch-size-multiple", 1, "--optimizer", "adam",
            "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01", "--lr", lr,
            "--lr-scheduler", "polynomial_decay", "--warmup-updates", warmup, "--total-num-update", updates,
            "--max-update", updates, "--cpu", "--num-workers", 0, "--seed", seed]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(a) for a in argv])
    cfg = convert_namespace_to_omegaconf(args)
    from fairseq import utils

    utils.import_user_module(cfg.common)
    utils.set_torch_seed(seed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    itr = trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=True)
    return task, model, trainer, itr


def init_cosines(data, dim, layers, batch):
    """Mean off-diagonal cosine of [CLS] and mean-pooled vectors of one batch, at initialisation."""
    import torch
    import torch.nn.functional as F

    task, model, _, itr = trainer_for(data, dim, "1e-3", "0.1", 0, "cls", 10, batch, layers)
    sample = next(itr)
    tokens = sample["contrastive"]["src_tokens"][: sample["contrastive"]["num_anchors"]]
    model.eval()
    out = {}
    with torch.no_grad():
        for pooling in ("cls", "mean"):
            v = F.normalize(model.sentence_representation(tokens, pooling=pooling), dim=-1)
            sims = v @ v.T
            n = sims.size(0)
            out[pooling] = float((sims.sum() - sims.diag().sum()) / (n * n - n))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the reference and mean pooling only, fewer updates")
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--setting", type=int, help=argparse.SUPPRESS)  # one setting, in a child process
    parser.add_argument("--out", default=str(common.RESULTS / "cls_collapse.json"))
    args = parser.parse_args()
    data = common.prepare_corpus(common.RUNS / "logs")["sentences_bin"]
    if args.setting is not None:  # child: train one setting, print JSON
        import json

        import torch

        torch.set_num_threads(1)
        name, over, mult = SETTINGS[args.setting]
        updates = int(args.updates * mult)
        _, _, trainer, itr = trainer_for(
            data, over.get("dim", args.dim), over.get("lr", "1e-3"), over.get("tau", "0.1"),
            over.get("warmup", max(1, round(0.06 * updates))), over.get("pooling", "cls"), updates,
            args.batch_size, args.layers)
        acc, start = [], time.time()
        for _ in range(updates):
            log = trainer.train_step([next(itr)])
            acc.append(float(log["cl_acc"]))
        print("RESULT " + json.dumps({"name": name, "updates": updates, "cl_acc": acc,
                                      "seconds": time.time() - start}))
        return
    if args.quick:
        args.updates = min(args.updates, 60)
    picks = QUICK if args.quick else range(len(SETTINGS))
    started = time.time()
    log_dir = common.RUNS / "cls_collapse"

    def child(i):
        cmd = [sys.executable, __file__, "--setting", i, "--updates", args.updates, "--batch-size", args.batch_size,
               "--layers", args.layers, "--dim", args.dim]
        _, _, tail = common.run(cmd, log_dir / f"setting{i}.log", threads=1)
        import json

        line = [l for l in tail.splitlines() if l.startswith("RESULT ")][-1]
        return json.loads(line[len("RESULT "):])

    results = common.run_parallel([lambda i=i: child(i) for i in picks], args.jobs)
    failures = [repr(r) for r in results if isinstance(r, Exception)]
    results = [r for r in results if not isinstance(r, Exception)]
    chance = 100.0 / (2 * args.batch_size - 1)
    for r in results:
        acc = r["cl_acc"]
        r["first_25_mean"] = sum(acc[:25]) / len(acc[:25])
        r["last_25_mean"] = sum(acc[-25:]) / len(acc[-25:])
        above = [i + 1 for i in range(len(acc)) if sum(acc[max(0, i - 9): i + 1]) / len(acc[max(0, i - 9): i + 1]) > 3 * chance]
        r["first_update_10_update_mean_above_3x_chance"] = above[0] if above else None
    cos = {d: init_cosines(data, d, args.layers, args.batch_size) for d in sorted({args.dim, 256})}
    result = {
        "command": " ".join(["python", "benchmarks/bench_cls_collapse.py"] + sys.argv[1:]),
        "model": f"clear_roberta {args.layers} layers x {args.dim} (4 heads), del-word, NT-Xent alone (--mlm off), "
                 f"{args.batch_size} sentences per update",
        "chance_accuracy": chance,
        "init_mean_cosine": {str(d): c for d, c in cos.items()},
        "settings": results,
        "failures": failures,
        "seconds": round(time.time() - started, 1),
        "machine": common.machine(),
    }
    common.write_json(args.out, result)
    for d, c in cos.items():
        print(f"init, {d} wide: mean cosine between sentences [CLS] {c['cls']:.5f}, mean pooling {c['mean']:.4f}")
    print(f"chance accuracy {chance:.2f}%")
    for r in results:
        print(f"{r['name']:38s} {r['updates']:4d} updates: accuracy first 25 {r['first_25_mean']:6.2f}%, "
              f"last 25 {r['last_25_mean']:6.2f}%, above 3x chance from update "
              f"{r['first_update_10_update_mean_above_3x_chance']}")
    print(f"wrote {args.out}")
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
