"""Cost per update of issue 44's options (hardness weighting, word repetition, distillation from the
guide), as a ratio against the same update without.

    python benchmarks/studies/bench_beyond_clear.py [--sentences 128] [--arch clear_roberta_small] [--repeats 5]
        [--device cpu|cuda] [--output benchmarks/results/beyond_clear.json]

The update of bench_negatives.py (whose model, batch and guide this reuses): ``--criterion clear``'s
NT-Xent on N sentences (2N views of 30 random tokens, views encoded with dropout, the loss, its
backward), timed for each configuration:

* ``base``: the plain loss;
* ``hardness``: ``--hardness-mode in_batch_negatives --hardness-strength 9``;
* ``word-rep``: the same update on views made by ``--augmentations word-rep`` (rate 0.32): each
  view longer by the tokens it repeats, so the encoder's cost grows with them (the augmentation
  itself runs in the data loader's workers and is not timed);
* ``distill``: ``--distill-weight 1 --no-guide-filter`` with a guide of the same size (built in
  memory; loaded through the hub in training): its forward over every view and the KL term;
* ``queue``: ``--queue-size`` 2.5 x N (ESimCSE's ratio), full from the warm-up on: the momentum
  encoder's move and its forward over every view, and the queue's columns in the loss.

The configurations run in turn, ``--repeats`` rounds; each ratio is the median over the rounds of
(its time / base's time in that round), and, as a second estimate on a machine shared with other
jobs (whose bursts only ever add time), the ratio of the fastest updates. Writes JSON and prints a
table. Quality is not measured here.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_negatives import build, sample  # noqa: E402  (the same model, batch and guide)

CONFIGS = ("base", "hardness", "word-rep", "distill", "queue")


def repeated_views(batch, rate):
    """``batch`` with every view made by word repetition of its body (as --augmentations word-rep)."""
    import numpy as np
    import torch
    from fairseq.data import data_utils

    from fairseq_clear.augmentations import word_repetition

    rng = np.random.default_rng(2)
    src = batch["contrastive"]["src_tokens"]
    rows = [torch.from_numpy(np.concatenate([r[:1], word_repetition(r[1:-1], rng, rate), r[-1:]]))
            for r in src.cpu().numpy()]
    out = {**batch, "contrastive": {**batch["contrastive"], "src_tokens": data_utils.collate_tokens(rows, 1)
                                    .to(src.device)}}
    return out, float(np.mean([len(r) for r in rows]) / src.size(1))


def criterion(task, name, guide, sentences):
    from fairseq_clear.criterions.clear import ClearCriterion, ClearCriterionConfig
    from fairseq_clear.guide import GuideModel

    options = {"hardness": {"hardness_mode": "in_batch_negatives", "hardness_strength": 9.0},
               "queue": {"queue_size": int(2.5 * sentences)}}.get(name, {})
    cfg = ClearCriterionConfig(temperature=0.05, loss_form="nt-xent", world_size=1, tpu=False, **options)
    crit = ClearCriterion(cfg, task)
    if name == "distill":  # what --guide-model DIR --distill-weight 1 --no-guide-filter sets up, without the disk
        crit.cfg.distill_weight, crit.cfg.no_guide_filter = 1.0, True
        crit.guide = GuideModel(guide)
    return crit


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sentences", type=int, default=128)
    p.add_argument("--arch", default="clear_roberta_small")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--word-rep-rate", type=float, default=0.32)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "beyond_clear.json"))
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    task, model, guide = build(args.arch, device)
    batch = sample(args.sentences, device)
    repeated, growth = repeated_views(batch, args.word_rep_rate)
    crits = {name: criterion(task, "base" if name == "word-rep" else name, guide, args.sentences) for name in CONFIGS}
    batches = {name: repeated if name == "word-rep" else batch for name in CONFIGS}

    def once(name):
        model.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss, _, _ = crits[name](model, batches[name])
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for name in CONFIGS:  # warm-up (3 rounds fill the queue)
        for _ in range(3 if name == "queue" else 1):
            once(name)
    times = {name: [] for name in CONFIGS}
    for _ in range(args.repeats):
        for name in CONFIGS:
            times[name].append(once(name))
    ratios = {name: statistics.median(t / b for t, b in zip(times[name], times["base"])) for name in CONFIGS}
    fastest = {name: min(times[name]) / min(times["base"]) for name in CONFIGS}
    result = {
        "command": "python " + " ".join([os.path.relpath(__file__, REPO)] + (argv if argv is not None else sys.argv[1:])),
        "arch": args.arch, "sentences": args.sentences, "device": str(device), "threads": args.threads,
        "repeats": args.repeats, "word_rep_rate": args.word_rep_rate, "word_rep_padded_length_ratio": growth,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "configs": {name: {"median_seconds": statistics.median(times[name]), "seconds": times[name],
                           "ratio_to_base": ratios[name], "fastest_ratio_to_base": fastest[name]}
                    for name in CONFIGS},
    }
    print(f"{args.arch}, {args.sentences} sentences, nt-xent, {device}, {args.threads} threads, {args.repeats} "
          f"rounds (load average {result['load_average']}); word-rep views {growth:.2f}x as long (padded)")
    print(f"{'config':12s}{'median s':>10s}{'x base':>9s}{'fastest s':>11s}{'x base':>9s}")
    for name in CONFIGS:
        c = result["configs"][name]
        print(f"{name:12s}{c['median_seconds']:10.3f}{c['ratio_to_base']:9.3f}{min(times[name]):11.3f}"
              f"{c['fastest_ratio_to_base']:9.3f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
