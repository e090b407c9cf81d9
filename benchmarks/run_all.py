"""``make bench`` / ``make bench-quick``: every benchmark, the plots and BENCHMARKS.md.

    python benchmarks/run_all.py [--quick] [--only speed,quality,...] [--skip embed,...]

Sections, in this order (the timing-sensitive ones first, alone on the machine):

  data        the benchmark corpus (clear-prepare on WikiText; cached in benchmarks/runs/)
  augment     augmentation throughput on one core           -> results/augment.json
  speed       --task clear vs fairseq masked_lm per update  -> results/train_speed.json
  scaling     1 rank vs 2 ranks (gloo)                       -> results/scaling.json
  preprocess  clear-prepare speed and memory                 -> results/bench_preprocess.json
  embed       embed() vs sentence-transformers               -> results/bench_embed.json
  quality     equal-compute reproduction (STS, GLUE)         -> results/quality.json (+ curves/)
  collapse    why [CLS]-pooled contrastive learning stalls   -> results/cls_collapse.json

then plots (results/*.png) and BENCHMARKS.md; the one-off studies in benchmarks/studies/ are not
run here. A section that fails is reported (and the exit status is non-zero) but does not stop
the others. ``--only`` re-runs some
sections and keeps the record of the others in results/run_all.json. The machine, the date, its
load average and any other training/test jobs seen are recorded in
results/run_all.json: timings from a busy machine are noisy.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SECTIONS = ["data", "augment", "speed", "scaling", "preprocess", "embed", "quality", "collapse"]


def section_command(name, quick):
    py = sys.executable
    b = common.REPO / "benchmarks"
    q = ["--quick"] if quick else []
    return {
        "augment": [py, b / "bench_augment.py", *q],
        "speed": [py, b / "bench_train_speed.py", *q],
        "scaling": [py, b / "bench_scaling.py", *q],
        "preprocess": [py, b / "bench_preprocess.py", *q],
        "embed": [py, b / "bench_embed.py", *(["--repeats", "1", "--loop-sentences", "100"] if quick else [])],
        "quality": [py, b / "bench_quality.py", *q],
        "collapse": [py, b / "bench_cls_collapse.py", *q],
    }[name]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every section at a smaller size (< 10 minutes)")
    parser.add_argument("--only", help="comma-separated sections to run (default: all)")
    parser.add_argument("--skip", default="", help="comma-separated sections to leave out")
    args = parser.parse_args()
    wanted = [s for s in (args.only.split(",") if args.only else SECTIONS) if s not in args.skip.split(",")]
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        sys.exit(f"unknown section(s) {unknown}; choose from {SECTIONS}")
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    logs = common.RUNS / "logs"
    started = time.time()
    record = {
        "command": " ".join(["python", "benchmarks/run_all.py"] + sys.argv[1:]),
        "quick": args.quick,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": common.machine(),
        "other_jobs_at_start": common.other_jobs(),
        "sections": {},
    }
    failed = []
    for name in wanted:
        t0 = time.time()
        load0 = os.getloadavg()
        print(f"== {name}", flush=True)
        try:
            if name == "data":
                info = common.prepare_corpus(logs)
                status, tail = 0, f"{info['sentences']['train']} training sentences in {info['sentences_bin']}"
            else:
                status, _, tail = common.run(section_command(name, args.quick), logs / f"{name}.log",
                                             threads=1, check=False)
        except Exception as e:  # reported below, the other sections still run
            status, tail = 1, repr(e)
        seconds = time.time() - t0
        record["sections"][name] = {"seconds": round(seconds, 1), "status": status,
                                    "loadavg_before": [round(x, 2) for x in load0],
                                    "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
        if status != 0:
            failed.append(name)
            record["sections"][name]["error_tail"] = tail[-2000:]
            print(f"   FAILED ({status}) after {seconds:.0f} s; see {logs / (name + '.log')}\n{tail[-1500:]}", flush=True)
        else:
            print(f"   done in {seconds:.0f} s" + (f": {tail}" if name == "data" else ""), flush=True)
    record["seconds"] = round(time.time() - started, 1)
    record["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    record_path = common.RESULTS / ("run_all_quick.json" if args.quick else "run_all.json")
    if args.only and record_path.is_file():
        # a partial re-run: the other sections keep their record; the total is the sum of the
        # sections' times, i.e. what one run of all of them takes
        previous = common.read_json(record_path)
        rerun = {"command": record["command"], "started": record["started"], "sections": wanted}
        previous["sections"].update(record["sections"])
        previous["reruns"] = previous.get("reruns", []) + [rerun]
        previous["seconds"] = round(sum(s["seconds"] for s in previous["sections"].values()), 1)
        previous["failed"] = [n for n, s in previous["sections"].items() if s["status"] != 0]
        previous["finished"] = record["finished"]
        record = previous
    record["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    record["other_jobs_at_end"] = common.other_jobs()
    if not args.only:
        record["failed"] = failed
    common.write_json(record_path, record)
    # report.py also rewrites the README's headline block (the README quotes no number by hand)
    for step, extra in (("plots.py", []), ("report.py", ["--readme", common.REPO / "README.md"])):
        status, _, tail = common.run([sys.executable, common.REPO / "benchmarks" / step, *extra],
                                     logs / f"{step}.log", check=False)
        if status != 0:
            failed.append(step)
            print(f"{step} FAILED:\n{tail[-1500:]}")
    print(f"total {record['seconds'] / 60:.1f} min" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
