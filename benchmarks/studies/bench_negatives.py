"""Cost per update of the negatives options and Matryoshka, as a ratio against the same update without.

    python benchmarks/studies/bench_negatives.py [--sentences 256] [--arch clear_roberta_small] [--repeats 5]
        [--loss-form nt-xent] [--device cpu|cuda] [--output benchmarks/results/negatives.json]

One contrastive update of ``--criterion clear`` (the views encoded by a ``clear_roberta_*`` model
with dropout, the loss, its backward) on N sentences (2N views of 30 random tokens, 5% of the
sentences planted as copies of others), timed for each configuration:

* ``base``: the plain loss;
* ``mask-duplicates``: ``--mask-duplicates``;
* ``matryoshka``: ``--matryoshka-dims`` at the full size and 4 prefixes (full, 256, 128, 64, 32 or
  what fits);
* ``guide``: a guide model of the same architecture scoring the views (``--guide-model``; built
  in memory here, loaded through the hub in training);
* ``all``: the three together.

The configurations run in turn, ``--repeats`` rounds, so that a load change hits them all; each
ratio is the median over the rounds of (its time / base's time in that round). The goal of the
issue: masking and Matryoshka at most 1.05x. Writes JSON and prints a table.
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

CONFIGS = ("base", "mask-duplicates", "matryoshka", "guide", "all")


def build(arch, device):
    import torch
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_CONFIG_REGISTRY

    import fairseq_clear  # noqa: F401
    from fairseq_clear.models.clear_roberta import ClearRobertaModel

    d = Dictionary()
    for i in range(1000):
        d.add_symbol(f"w{i}")
    d.add_symbol("<mask>")

    class Task:
        source_dictionary = target_dictionary = d
        is_contrastive = True
        step = None

        def max_positions(self):
            return 64

    def model():
        args = argparse.Namespace(tokens_per_sample=64, max_positions=64, dropout=0.1, attention_dropout=0.1,
                                  projection_layers=0)
        ARCH_CONFIG_REGISTRY[arch](args)
        return ClearRobertaModel.build_model(args, Task()).to(device)

    torch.manual_seed(0)
    return Task(), model().train(), model().eval()


def sample(n, device):
    import torch

    from fairseq_clear.negatives import token_key

    g = torch.Generator().manual_seed(1)
    views = torch.randint(4, 1000, (2 * n, 32), generator=g)
    views[:, 0], views[:, -1] = 0, 2
    for j in range(0, n, 20):  # 5%: sentence j+1 a copy of sentence j
        if j + 1 < n:
            views[j + 1], views[n + j + 1] = views[j], views[n + j]
    keys = [token_key(views[i]) for i in range(n)]
    return {"contrastive": {"src_tokens": views.to(device), "num_anchors": n, "positives_per_anchor": 1,
                            "source_keys": torch.tensor(keys * 2, device=device)},
            "ntokens": int(views.numel()), "nsentences": n}


def criterion(task, name, dim, loss_form, guide):
    from fairseq_clear.criterions.clear import ClearCriterion, ClearCriterionConfig

    dims = ",".join(str(d) for d in [dim] + [d for d in (256, 128, 64, 32) if d < dim][:4])
    options = {
        "mask-duplicates": {"mask_duplicates": True},
        "matryoshka": {"matryoshka_dims": dims},
        "all": {"mask_duplicates": True, "matryoshka_dims": dims},
    }.get(name, {})
    cfg = ClearCriterionConfig(temperature=0.05, loss_form=loss_form, world_size=1, tpu=False, **options)
    crit = ClearCriterion(cfg, task)
    if name in ("guide", "all"):
        from fairseq_clear.guide import GuideModel

        crit.guide = GuideModel(guide)  # what --guide-model loads, without the disk
    return crit, dims


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sentences", type=int, default=256)
    p.add_argument("--arch", default="clear_roberta_small")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--loss-form", default="nt-xent", choices=("nt-xent", "simcse"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "negatives.json"))
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    task, model, guide = build(args.arch, device)
    batch = sample(args.sentences, device)
    dim = model.representation_dim("representation")
    crits = {name: criterion(task, name, dim, args.loss_form, guide) for name in CONFIGS}

    def once(name):
        model.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss, _, logs = crits[name][0](model, batch)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start, logs

    for name in CONFIGS:  # warm-up
        once(name)
    times = {name: [] for name in CONFIGS}
    masked = {}
    for _ in range(args.repeats):
        for name in CONFIGS:
            t, logs = once(name)
            times[name].append(t)
            masked[name] = {k: int(logs[k]) for k in ("dup_masked", "guide_masked") if k in logs}
    ratios = {name: statistics.median(t / b for t, b in zip(times[name], times["base"])) for name in CONFIGS}
    result = {
        "command": "python " + " ".join([os.path.relpath(__file__, REPO)] + (argv if argv is not None else sys.argv[1:])),
        "arch": args.arch, "sentences": args.sentences, "loss_form": args.loss_form, "device": str(device),
        "threads": args.threads, "repeats": args.repeats, "matryoshka_dims": crits["matryoshka"][1],
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "configs": {name: {"median_seconds": statistics.median(times[name]), "seconds": times[name],
                           "ratio_to_base": ratios[name], "masked_last": masked.get(name, {})} for name in CONFIGS},
    }
    print(f"{args.arch}, {args.sentences} sentences, {args.loss_form}, {device}, {args.repeats} rounds "
          f"(load average {result['load_average']})")
    print(f"{'config':18s}{'median s':>10s}{'x base':>9s}  masked")
    for name in CONFIGS:
        c = result["configs"][name]
        print(f"{name:18s}{c['median_seconds']:10.3f}{c['ratio_to_base']:9.3f}  {c['masked_last']}")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
