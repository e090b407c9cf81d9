"""Shared pieces of the benchmarks: paths, the benchmark corpus, subprocess runs, statistics."""

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CLEAR_SHARED_DATA", REPO.parent / "shared" / "data"))
CORPUS_DIR = SHARED / "corpus" / "wikitext-103"
CORPUS_FILES = ["wiki.train.tokens.first_articles", "wiki.valid.tokens", "wiki.test.tokens"]
STS_DIR = SHARED / "sts"
GLUE_DIR = SHARED / "glue" / "glue_data"
SYNONYMS_JSON = SHARED / "synonyms" / "counterfitted_neighbors.json"
RESULTS = Path(os.environ.get("CLEAR_BENCH_RESULTS", REPO / "benchmarks" / "results"))
RUNS = Path(os.environ.get("CLEAR_BENCH_RUNS", REPO / "benchmarks" / "runs"))
USER_DIR = str(REPO / "fairseq_clear")
TIMED_TRAIN = str(REPO / "benchmarks" / "fairseq_train_timed.py")

#: the benchmark corpus: sentencepiece vocabulary and longest sample (<s> and </s> included)
VOCAB_SIZE = 8000
TOKENS_PER_SAMPLE = 64


def bin_path(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def env(threads: int = 1, **extra) -> dict:
    """Environment of a child: ``threads`` math threads, unbuffered, no progress bars."""
    e = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        e[k] = str(threads)
    e["PYTHONUNBUFFERED"] = "1"
    # the recipes call the console scripts by name: find this interpreter's, also when the venv is not activated
    e["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), e.get("PATH", "")])
    e.setdefault("LOGLEVEL", "INFO")
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(cmd, log_path=None, threads=1, check=True, timeout=None, extra_env=None):
    """Run ``cmd`` (output to ``log_path`` if given); returns (returncode, seconds, output tail)."""
    cmd = [str(c) for c in cmd]
    start = time.perf_counter()
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env(threads, **(extra_env or {})),
                                  timeout=timeout, cwd=REPO)
        tail = Path(log_path).read_text(errors="replace")[-4000:]
    else:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env(threads, **(extra_env or {})), timeout=timeout, cwd=REPO)
        tail = proc.stdout[-4000:]
    seconds = time.perf_counter() - start
    if check and proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.returncode, seconds, tail


def log_records(path, kinds=("train_inner",)):
    """The json records of a fairseq ``--log-format json`` log whose logger is one of ``kinds``
    (train_inner: every --log-interval updates; train: an epoch's end; valid), in order; none
    for a missing log. The package's reader (``training_log.records``)."""
    from fairseq_clear.evaluation.training_log import records

    path = Path(path)
    return records(path.read_text().splitlines() if path.is_file() else [], *kinds)


def run_parallel(jobs, workers: int):
    """Run ``jobs`` (callables) on ``workers`` threads, each a subprocess driver; returns results in order.

    Exceptions are returned in place of results so that one failure does not stop the others.
    """
    results = [None] * len(jobs)
    lock = threading.Lock()
    todo = list(range(len(jobs)))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            try:
                results[i] = jobs[i]()
            except Exception as e:  # reported by the caller
                results[i] = e

    threads = [threading.Thread(target=worker) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def machine() -> dict:
    info = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 1024 ** 2, 1)
    except OSError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
        import fairseq

        info["fairseq"] = fairseq.__version__
    except ImportError:
        pass
    return info


def other_jobs() -> list:
    """Command lines of training/test jobs on this machine that are not ours (for the report)."""
    mine = {os.getpid()}
    pid = os.getpid()
    try:  # our ancestors (make, a shell) are not "others"
        while pid > 1:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
            mine.add(pid)
    except (OSError, ValueError):
        pass
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if any(k in cmd for k in ("pytest", "fairseq-train", "clear-prepare", "fairseq-preprocess")) \
                and "benchmarks/" not in cmd and str(RUNS) not in cmd:
            found.append(cmd[:200])
    return found


def _is_leaf(x) -> bool:
    """A list of scalars, or a dict of scalars and lists of scalars: written on one line."""
    def scalar(v):
        return not isinstance(v, (dict, list))

    if isinstance(x, list):
        return all(scalar(v) for v in x)
    return all(scalar(v) or (isinstance(v, list) and all(scalar(w) for w in v)) for v in x.values())


def dumps_compact(data, level=0) -> str:
    """JSON indented by 2 like ``json.dumps(indent=2)``, but each leaf container on one line
    (a per-update curve or a mean/std/values dict is one line, not one line per number)."""
    if isinstance(data, dict) and _is_leaf(data):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dumps_compact(v)}" for k, v in data.items()) + "}"
    if not isinstance(data, (dict, list)) or _is_leaf(data):
        return json.dumps(data, separators=(",", ": "))
    pad = "  " * (level + 1)
    if isinstance(data, dict):
        items = [f"{pad}{json.dumps(str(k))}: {dumps_compact(v, level + 1)}" for k, v in data.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    items = [pad + dumps_compact(v, level + 1) for v in data]
    return "[\n" + ",\n".join(items) + "\n" + "  " * level + "]"


def write_json(path, data, compact=False):
    """Write ``data`` to ``path``, replacing an earlier result only with a complete file.

    ``compact``: leaf containers on one line (:func:`dumps_compact`), for the summaries in results/.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text((dumps_compact(data) if compact else json.dumps(data, indent=2)) + "\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():  # ours: named after this process, written just above
            tmp.unlink()


def curves_path(result_path) -> Path:
    """Where the per-update training curves of a quality result are kept: ``curves/<its name>``
    next to it (so that ``quality_horizon_*.json`` globs never pick them up)."""
    result_path = Path(result_path)
    return result_path.parent / "curves" / result_path.name


def load_horizon():
    """quality_horizon.json, with the runs of later quality_horizon_*.json files (a variant
    re-run on its own) replacing the same variant and seed; every command is listed."""
    path = RESULTS / "quality_horizon.json"
    if not path.is_file():
        return None
    h = read_json(path)
    for extra in sorted(RESULTS.glob("quality_horizon_*.json")):
        e = read_json(extra)
        again = {(r["variant"], r["seed"]) for r in e["runs"]}
        h["runs"] = [r for r in h["runs"] if (r["variant"], r["seed"]) not in again] + e["runs"]
        h["table"] = {**h["table"], **e["table"]}
        h.setdefault("more_commands", []).append(e["command"])
    return h


def read_json(path):
    return json.loads(Path(path).read_text())


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def mean_std(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    if len(xs) == 1:
        return xs[0], 0.0
    return statistics.mean(xs), statistics.stdev(xs)


# ---- the benchmark corpus ---------------------------------------------------------------

def _copy_lines(src_prefix: Path, dst_prefix: Path, keep=lambda n: n > 1) -> int:
    """Copy the lines of a binarized split whose length (with </s>) passes ``keep``; returns the count.

    The default drops empty lines (document separators, stored as a lone </s>).
    """
    from fairseq.data import indexed_dataset

    ds = indexed_dataset.make_dataset(str(src_prefix), impl="mmap")
    builder = indexed_dataset.make_builder(str(dst_prefix) + ".bin", impl="mmap", vocab_size=VOCAB_SIZE + 10)
    kept = 0
    for i in range(len(ds)):
        item = ds[i]
        if keep(len(item)):
            builder.add_item(item)
            kept += 1
    builder.finalize(str(dst_prefix) + ".idx")
    return kept


def equal_length_corpus(length: int = 30) -> Path:
    """The training sentences of exactly ``length`` tokens (with </s>), as a data-bin.

    fairseq orders samples by length, then by a seeded shuffle: with one length
    the unshuffled first batches are random sentences rather than the shortest ones.
    """
    data = prepare_corpus(RUNS / "logs")
    out = RUNS / "data" / f"length{length}"
    if not (out / "train.idx").is_file():
        out.mkdir(parents=True, exist_ok=True)
        src = Path(data["sentences_bin"])
        _copy_lines(src / "train", out / "train", keep=lambda n: n == length)
        for name in ("dict.txt", "sentencepiece.model"):
            shutil.copy(src / name, out / name)
    return out


def prepare_corpus(log_dir: Path) -> dict:
    """WikiText (valid + test + first train articles) → ``RUNS/data/{documents,sentences}``.

    ``documents`` is clear-prepare's data-bin (empty lines separate documents; DeCLUTR
    needs them). ``sentences`` is the same without the empty lines, so that fairseq's
    ``masked_lm`` with ``--sample-break-mode eos`` and ``--task clear`` see the same
    sentences, in the same order, in the same batches. Cached: done once.
    """
    base = RUNS / "data"
    docs, sents = base / "prepared" / "data-bin", base / "sentences"
    done = base / "done.json"
    if done.is_file():
        return read_json(done)
    missing = [str(CORPUS_DIR / f) for f in CORPUS_FILES if not (CORPUS_DIR / f).is_file()]
    if missing:
        raise FileNotFoundError(f"benchmark corpus missing: {', '.join(missing)}")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    cmd = [bin_path("clear-prepare"), *[CORPUS_DIR / f for f in CORPUS_FILES], base / "prepared",
           "--vocab-size", VOCAB_SIZE, "--tokens-per-sample", TOKENS_PER_SAMPLE,
           "--workers", "2", "--no-progress", "--remove-intermediate"]
    _, seconds, _ = run(cmd, log_dir / "clear-prepare.log", threads=1)
    sents.mkdir(parents=True)
    counts = {}
    for split in ("train", "valid", "test"):
        counts[split] = _copy_lines(docs / split, sents / split)
    for name in ("dict.txt", "sentencepiece.model"):
        shutil.copy(docs / name, sents / name)
    summary = read_json(base / "prepared" / "summary.json")
    info = {
        "command": " ".join(str(c) for c in cmd),
        "seconds": round(seconds, 1),
        "documents_bin": str(docs),
        "sentences_bin": str(sents),
        "sentences": counts,
        "train_tokens": summary["splits"]["train"]["tokens"],
        "train_documents": summary["splits"]["train"]["documents"],
        "vocab_size": VOCAB_SIZE,
        "tokens_per_sample": TOKENS_PER_SAMPLE,
    }
    write_json(done, info)
    return info
