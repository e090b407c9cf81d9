"""Throughput of CLEAR's augmentations on one core (issue 6, part 2).

    python benchmarks/bench_augment.py [--quick]

For each augmentation and the paper's compositions, on the benchmark corpus's
training sentences (WikiText, sentencepiece, see common.prepare_corpus):

* ``function``: sentences/s of the pure function ``f(body, rng)`` alone (one view);
* ``view``: sentences/s of what the data loader pays per view:
  ``ContrastiveViewsDataset.view`` = re-keying the Philox generator by
  (seed, epoch, index, view), the function, ``<s>``/``</s>`` and the tensor.

The process is pinned to one CPU (when the OS allows it) with one math thread.
Best of ``--repeats`` passes over ``--sentences`` sentences. Goal: >= 50,000
sentences/s for each augmentation alone. Writes benchmarks/results/augment.json.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

GOAL = 50000
COMPOSITIONS = ["del-word", "del-span", "reorder", "subs", "none",
                "subs,del-word", "subs,del-span", "del-word,reorder", "del-span,reorder"]


def load_bodies(data_bin: str, count: int):
    import numpy as np
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(os.path.join(data_bin, "dict.txt"))
    lines = data_utils.load_indexed_dataset(os.path.join(data_bin, "train"), dictionary)
    bodies = []
    for i in range(min(count, len(lines))):
        body = lines[i][:-1].numpy()
        if len(body):
            bodies.append(body)
    return dictionary, bodies, float(np.mean([len(b) for b in bodies]))


def best_rate(fn, items, repeats):
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        fn(items)
        seconds = time.perf_counter() - start
        best = max(best, len(items) / seconds)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer sentences and repeats")
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(common.RESULTS / "augment.json"))
    args = parser.parse_args()
    if args.quick:
        args.sentences, args.repeats = min(args.sentences, 5000), min(args.repeats, 3)
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
        pinned = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pinned = None
    import torch

    torch.set_num_threads(1)
    import numpy as np
    import fairseq_clear  # noqa: F401
    from fairseq_clear import augmentations as aug
    from fairseq_clear.keyed_rng import KeyedRNG
    from fairseq_clear.data import ContrastiveViewsDataset
    from fairseq_clear.synonyms import load_synonym_index

    data = common.prepare_corpus(common.RUNS / "logs")
    dictionary, bodies, mean_len = load_bodies(data["sentences_bin"], args.sentences)
    del_idx = dictionary.add_symbol("[DEL]")
    table = common.RUNS / "data" / "synonyms.json"
    if not table.is_file():
        common.run([common.bin_path("clear-synonyms"), "counterfitted", common.SYNONYMS_JSON, table])
    index = load_synonym_index(str(table), dictionary, os.path.join(data["sentences_bin"], "sentencepiece.model"))
    params = aug.AugmentationParams()

    class Items:
        """A stand-in for SentenceDataset: ``<s> body </s>`` tensors."""

        def __init__(self, bodies):
            self.items = [torch.from_numpy(np.concatenate([[0], b, [2]]).astype(np.int64)) for b in bodies]
            self.sizes = np.array([len(t) for t in self.items])

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            return self.items[i]

    items = Items(bodies)
    results = {}
    for comp in COMPOSITIONS:
        fn = aug.build_augmentation(aug.parse_augmentations(comp), params, del_idx, index)
        rng = KeyedRNG()(1, 1, 0, 1)

        def pure(batch, fn=fn, rng=rng):
            for b in batch:
                fn(b, rng)

        views = ContrastiveViewsDataset(items, fn, seed=1, max_body_len=common.TOKENS_PER_SAMPLE - 2,
                                        bos=0, eos=2, pad=1)

        def per_view(indices, views=views):
            for i in indices:
                views.view(i, 1)

        fn_rate = best_rate(pure, bodies, args.repeats)
        view_rate = best_rate(per_view, list(range(len(bodies))), args.repeats)
        out_len = float(np.mean([len(fn(b, KeyedRNG()(1, 1, i, 1))) for i, b in enumerate(bodies[:2000])]))
        results[comp] = {
            "function_sentences_per_s": round(fn_rate),
            "view_sentences_per_s": round(view_rate),
            "function_us_per_sentence": round(1e6 / fn_rate, 2),
            "view_us_per_sentence": round(1e6 / view_rate, 2),
            "mean_view_tokens": round(out_len, 2),
            "meets_goal": fn_rate >= GOAL if "," not in comp and comp != "none" else None,
        }
        print(f"{comp:18s} function {fn_rate:>10,.0f}/s ({1e6 / fn_rate:5.1f} µs)   "
              f"dataset view {view_rate:>10,.0f}/s ({1e6 / view_rate:5.1f} µs)   "
              f"view length {out_len:5.1f} tokens (sentence {mean_len:.1f})")
    result = {
        "command": " ".join(["python", "benchmarks/bench_augment.py"] + sys.argv[1:]),
        "sentences": len(bodies),
        "mean_sentence_tokens": round(mean_len, 2),
        "repeats": args.repeats,
        "pinned_cpus": pinned,
        "goal_sentences_per_s": GOAL,
        "results": results,
        "machine": common.machine(),
    }
    common.write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
