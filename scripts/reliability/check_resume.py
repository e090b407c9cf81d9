#!/usr/bin/env python
"""Kill a CLEAR run with SIGKILL several times, restart the same command each time, and
compare with an uninterrupted run: logged values of every update, final weights and
Adam moments, data-iterator position.

    python scripts/reliability/check_resume.py [--num-workers 2] [--kills 8,19,28,44]
        [--random-kills 3] [--max-update 60] [--data DIR] [--work DIR]

``--kills`` kills right after the checkpoint of those updates is written (19 = the end
of epoch 1 with the default data); ``--random-kills N`` kills N more times at a random
log line (seeded), wherever the run is. Exit status 0 when everything matches.
"""

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))

from helpers import make_binarized, synthetic_sentences, train_args  # noqa: E402

from harness.runs import (  # noqa: E402
    by_update, load_state, logged, max_abs_diff, optimizer_tensors, run_until, saved_at,
)

KEYS = ("loss", "mlm_loss", "cl_loss", "cl_acc", "gnorm", "lr", "ppl")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--kills", default="8,19,28,44", help="kill after these checkpoints")
    p.add_argument("--random-kills", type=int, default=2)
    p.add_argument("--max-update", type=int, default=60)
    p.add_argument("--save-interval-updates", type=int, default=4)
    p.add_argument("--data", help="a binarized data dir (default: 600 synthetic sentences)")
    p.add_argument("--work", help="working directory (default: a temporary one)")
    p.add_argument("--extra", default="", help="more fairseq-train options, space separated")
    args = p.parse_args()

    work = Path(args.work or tempfile.mkdtemp(prefix="clear-resume-"))
    shutil.rmtree(work / "full", ignore_errors=True)
    shutil.rmtree(work / "killed", ignore_errors=True)
    data = args.data or make_binarized(work / "data", synthetic_sentences(600, 0),
                                       synthetic_sentences(60, 1))

    def command(save):
        a = train_args(data, save, "--save-interval-updates", str(args.save_interval_updates),
                       *args.extra.split(), max_update=args.max_update, batch_size=32)
        a[a.index("--num-workers") + 1] = str(args.num_workers)
        return a

    out, rc, _ = run_until(command(work / "full"), lambda line: False)
    if rc != 0:
        sys.exit(f"uninterrupted run failed:\n{out[-3000:]}")
    full = by_update(logged(out))

    rng = random.Random(0)
    stops = [("after checkpoint", saved_at(int(k))) for k in args.kills.split(",") if k]
    for _ in range(args.random_kills):
        n = rng.randint(3, 12)
        counter = {"n": 0}

        def at_random(line, counter=counter, n=n):
            counter["n"] += "| train_inner |" in line
            return counter["n"] >= n

        stops.append((f"random (after {n} more updates)", at_random))
    segments, report = [], []
    for what, stop in stops + [("to the end", lambda line: False)]:
        out, rc, killed = run_until(command(work / "killed"), stop, sig=signal.SIGKILL)
        records = by_update(logged(out))
        resumed = [l for l in out.splitlines() if "Loaded checkpoint" in l]
        report.append({"segment": what, "killed": killed, "rc": rc,
                       "loaded": resumed[0].split("Loaded checkpoint")[-1].strip() if resumed else None,
                       "updates": [min(records), max(records)] if records else None})
        segments.append(records)
        if not killed and rc != 0:
            sys.exit(f"segment '{what}' failed:\n{out[-3000:]}")
        if not killed:
            # finished: fairseq would take one more update if started again (it checks
            # --max-update after a step), so the remaining kills are not run
            break

    mismatches = []
    seen = set()
    for records in segments:
        for u, r in records.items():
            seen.add(u)
            for k in KEYS:
                if r.get(k) != full[u].get(k):
                    mismatches.append((u, k, full[u].get(k), r.get(k)))
    a = load_state(work / "full" / "checkpoint_last.pt")
    b = load_state(work / "killed" / "checkpoint_last.pt")
    weights = max(max_abs_diff(a["model"], b["model"]).values())
    moments = max(max_abs_diff(optimizer_tensors(a), optimizer_tensors(b)).values())
    result = {
        "segments": report,
        "updates_logged": len(seen), "updates": args.max_update,
        "logged_value_mismatches": len(mismatches), "first_mismatches": mismatches[:5],
        "max_abs_weight_diff": weights, "max_abs_adam_moment_diff": moments,
        "iterator_equal": a["extra_state"]["train_iterator"] == b["extra_state"]["train_iterator"],
    }
    print(json.dumps(result, indent=1))
    ok = (not mismatches and weights <= 1e-6 and moments <= 1e-6 and result["iterator_equal"]
          and seen == set(range(1, args.max_update + 1)))
    print("RESUME EXACT" if ok else "RESUME DIFFERS")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
