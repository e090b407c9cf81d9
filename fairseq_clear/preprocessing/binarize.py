"""Binarize as ``fairseq-preprocess --only-source --srcdict dict.txt`` does, and check the result
against what the encoder wrote.

:func:`binarize` runs fairseq's own binarizer (``FileBinarizer.multiprocess_dataset`` with a
``VocabularyDatasetBinarizer``, the calls fairseq_cli/preprocess.py makes for that command line) in
this process, its workers forked from here: the same ``dict.txt``, ``.bin`` and ``.idx``, byte for
byte, without starting and importing a second interpreter (tests/e2e/test_preprocess.py compares
them with the console script's). :func:`run_fairseq_preprocess` runs the console script itself
(the reference).
"""

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from .common import PrepareError, progress

logger = logging.getLogger(__name__)

UNK_INDEX = 3  # fairseq's <unk>


def fairseq_preprocess_command() -> List[str]:
    """The ``fairseq-preprocess`` console script of this environment (or ``python -m``)."""
    script = Path(sys.executable).parent / "fairseq-preprocess"
    if script.is_file():
        return [str(script)]
    found = shutil.which("fairseq-preprocess")
    if found:
        return [found]
    return [sys.executable, "-m", "fairseq_cli.preprocess"]


def run_fairseq_preprocess(dict_path: str, prefixes: Dict[str, str], destdir: str, workers: int,
                           expected_tokens: int = 0, enabled_progress: bool = True,
                           log_path: str = "") -> str:
    """Run fairseq-preprocess into ``destdir``; returns its output (also written to ``log_path``).

    The one binarize path of clear-prepare, clear-prepare-pairs and GLUE.
    ``prefixes``: split name ("train", "valid", "test") → text file of pieces.
    ``expected_tokens``: tokens incl. one ``</s>`` per line, for the progress bar
    (fairseq-preprocess has none; the bar follows the size of the .bin files; 0: no bar).
    """
    enabled_progress = enabled_progress and expected_tokens > 0
    cmd = fairseq_preprocess_command() + [
        "--only-source", "--srcdict", dict_path, "--destdir", destdir,
        "--workers", str(max(1, workers)), "--dataset-impl", "mmap",
        "--trainpref", prefixes["train"],
    ]
    for split in ("valid", "test"):
        if split in prefixes:
            cmd += [f"--{split}pref", prefixes[split]]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    logger.info("running %s", " ".join(cmd))
    dtype_bytes = 2  # uint16 while the dictionary has < 65500 entries
    out_chunks: List[str] = []
    with progress(total=expected_tokens * dtype_bytes, desc="binarize", enabled=enabled_progress) as bar:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env)
        reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True)
        reader.start()
        seen = 0
        while proc.poll() is None:
            time.sleep(0.5)
            size = sum(
                os.path.getsize(os.path.join(destdir, n))
                for n in _listdir(destdir) if n.endswith(".bin")
            )
            size = min(size, bar.total or size)
            if size > seen:
                bar.update(size - seen)
                seen = size
        reader.join()
        if bar.total and seen < bar.total:
            bar.update(bar.total - seen)
    output = "".join(out_chunks)
    if log_path:
        with open(log_path, "w", encoding="utf-8") as f:
            f.write(" ".join(cmd) + "\n" + output)
    if proc.returncode != 0:
        raise PrepareError(
            f"fairseq-preprocess failed (exit {proc.returncode}); its output:\n{output[-4000:]}"
        )
    return output


#: fairseq-preprocess's output names of the splits it reads from --trainpref/--validpref/--testpref
SPLITS = ("train", "valid", "test")


def binarize(dict_path: str, prefixes: Dict[str, str], destdir: str, workers: int,
             expected_tokens: int = 0, enabled_progress: bool = True, log_path: str = "") -> str:
    """``fairseq-preprocess --only-source --srcdict dict_path --dataset-impl mmap`` into ``destdir``,
    in this process (see the module's docstring); returns the lines fairseq-preprocess would log
    about the work (also written to ``log_path``). Arguments as :func:`run_fairseq_preprocess`."""
    from fairseq.binarizer import FileBinarizer, VocabularyDatasetBinarizer
    from fairseq.data import Dictionary

    from fairseq.data.indexed_dataset import best_fitting_int_dtype

    os.makedirs(destdir, exist_ok=True)
    vocab = Dictionary.load(dict_path)  # TranslationTask.load_dictionary, fairseq-preprocess's default task
    vocab.save(os.path.join(destdir, "dict.txt"))
    lines = [f"[None] Dictionary: {len(vocab)} types"]
    enabled_progress = enabled_progress and expected_tokens > 0
    total = expected_tokens * np.dtype(best_fitting_int_dtype(len(vocab))).itemsize
    with progress(total=total, desc="binarize", enabled=enabled_progress) as bar:
        done = threading.Event()
        watcher = threading.Thread(target=_follow_sizes, args=(destdir, bar, done), daemon=True)
        if enabled_progress:
            watcher.start()
        try:
            for split in SPLITS:
                if split not in prefixes:
                    continue
                summary = FileBinarizer.multiprocess_dataset(
                    prefixes[split], "mmap", VocabularyDatasetBinarizer(vocab, append_eos=True),
                    os.path.join(destdir, split), vocab_size=len(vocab), num_workers=max(1, workers))
                lines.append(f"[None] {prefixes[split]}: {summary} (by {vocab.unk_word})")
        finally:
            done.set()
            if enabled_progress:
                watcher.join()
    lines.append(f"Wrote preprocessed data to {destdir}")
    output = "\n".join(lines) + "\n"
    if log_path:
        with open(log_path, "w", encoding="utf-8") as f:
            f.write(f"fairseq's binarizer in this process (as fairseq-preprocess --only-source --srcdict "
                    f"{dict_path} --destdir {destdir} --workers {max(1, workers)})\n" + output)
    return output


def _follow_sizes(destdir, bar, done):
    """The progress bar follows the size of the .bin files (the binarizer reports nothing)."""
    seen = 0
    while not done.wait(0.5):
        size = min(sum(os.path.getsize(os.path.join(destdir, n)) for n in _listdir(destdir)
                       if n.endswith(".bin")), bar.total or 0)
        if size > seen:
            bar.update(size - seen)
            seen = size
    if bar.total and seen < bar.total:
        bar.update(bar.total - seen)


def count_lines(prefix: str) -> int:
    """Lines of the binarized split at ``prefix`` as fairseq reads them (-1 when absent)."""
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(prefix, None)
    return len(dataset) if dataset is not None else -1


def _listdir(d):
    try:
        return os.listdir(d)
    except FileNotFoundError:
        return []


def _blocks(path: str, dtype, offset: int, count: int, block: int = 1 << 22):
    """``count`` values of ``dtype`` from byte ``offset`` of ``path``, a block at a time."""
    with open(path, "rb") as f:
        f.seek(offset)
        while count > 0:
            values = np.fromfile(f, dtype=dtype, count=min(block, count))
            if not len(values):
                raise PrepareError(f"'{path}' is shorter than its index says")
            count -= len(values)
            yield values


def check_binarized(destdir: str, split: str, expected_lines: int, expected_tokens: int,
                    expected_unk: int) -> Dict:
    """Read ``split`` back with fairseq and compare with the encoder's counts.

    A mismatch in ``<unk>`` means dict.txt and the sentencepiece model disagree.
    """
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    prefix = os.path.join(destdir, split)
    ds = MMapIndexedDataset(prefix)  # fairseq's reader: checks the header
    lines, dtype = len(ds), ds._index.dtype
    del ds
    # the sizes and tokens in blocks of plain reads (constant memory: a mapping of the files would
    # keep every page read resident, gigabytes for a large corpus); the sizes follow the index's
    # header as its writer writes it (magic, version, dtype code, line count)
    header = len(MMapIndexedDataset.Index._HDR_MAGIC) + 8 + 1 + 8
    tokens = empty = unk = 0
    for block in _blocks(prefix + ".idx", np.int32, header, lines):
        tokens += int(block.sum(dtype=np.int64)) - len(block)  # without the </s> of each line
        empty += int((block == 1).sum())
    for block in _blocks(prefix + ".bin", dtype, 0, os.path.getsize(prefix + ".bin") // np.dtype(dtype).itemsize):
        unk += int(np.count_nonzero(block == UNK_INDEX))
    problems = []
    if lines != expected_lines:
        problems.append(f"{lines} lines, expected {expected_lines}")
    if tokens != expected_tokens:
        problems.append(f"{tokens} tokens, expected {expected_tokens}")
    if unk != expected_unk:
        problems.append(
            f"{unk} <unk>, expected {expected_unk}: dict.txt and the sentencepiece model disagree"
        )
    if problems:
        raise PrepareError(f"binarized split '{prefix}' does not match the encoded text: "
                           + "; ".join(problems))
    return {"lines": lines, "tokens": tokens, "empty_lines": empty, "unk": unk}
