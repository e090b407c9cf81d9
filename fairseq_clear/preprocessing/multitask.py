"""``clear-prepare-multitask``: seed 004's three datasets -> the data directory of ``--task multitask``.

Sources (one of):

* ``--glue-dir``: GLUE's ``SST-2`` (sentiment), ``MRPC`` or ``QQP`` (paraphrase,
  ``--paraphrase``) and ``STS-B``; train.tsv is the train split, dev.tsv the valid split (the
  GLUE test files have no labels);
* ``--cs224n-dir``: the CS224N default project's ``ids-sst-*.csv`` (5 sentiment classes),
  ``quora-*.csv`` and ``sts-*.csv`` (tab-separated, with a header naming ``sentence``,
  ``sentiment``, ``sentence1``, ``sentence2``, ``is_duplicate``, ``similarity``): ``-train``
  and ``-dev``, and ``-test`` when its rows carry labels.

Every sentence is encoded with the model's own tokenizer (``--tokenizer-from``: an imported
Hugging Face model, a checkpoint's data directory, clear-prepare's output) and its ids written
into fairseq's .bin/.idx directly (direct_binarize.py: the files ``fairseq-preprocess`` writes with
its dict.txt, byte for byte), as clear-prepare-pairs does::

    OUT/dict.txt, OUT/<tokenizer files>, OUT/multitask.json (rows read, kept, skipped; classes)
    OUT/{sentiment,paraphrase,sts}/input0/SPLIT.{bin,idx}   first sentences
    OUT/{paraphrase,sts}/input1/SPLIT.{bin,idx}              second sentences
    OUT/{task}/label/SPLIT.label                             class, 0/1, or score (0-5)

``--limit-train N`` keeps a seeded random N rows of each task's train split (CPU-sized runs).
Nothing is dropped silently: rows without a label or with an empty sentence are counted. A label
outside the task's documented set (SST-2: 0/1, the CS224N SST: 0-4, paraphrase: 0/1, STS: 0-5) is
an error naming file, line and value, and the sentiment head's class count is the source's, never
the largest label seen. Every file is read and checked before anything is encoded or written.

``--out`` is written through the export's output directory (export/output_dir.py): staged in a
marked sibling, listed in its manifest; a rerun into our own output replaces only the files listed
there, and nothing else in it is touched.
"""

import csv
import os
import shutil
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import vocabulary
from ..errors import NotUtf8Error
from .glue_data import get_task, read_tsv
from ..export.output_dir import check_output_dir, staged_output
from . import encode as encode_mod
from . import direct_binarize
from .binarize import count_lines
from ..atomic_files import write_json
from .common import PrepareError

TASKS = ("sentiment", "paraphrase", "sts")
PAIR_TASKS = ("paraphrase", "sts")
GLUE_SOURCES = {"sentiment": "SST-2", "sts": "STS-B"}
CS224N_FILES = {"sentiment": "ids-sst", "paraphrase": "quora", "sts": "sts"}
CS224N_COLUMNS = {"sentiment": (("sentence",), "sentiment"),
                  "paraphrase": (("sentence1", "sentence2"), "is_duplicate"),
                  "sts": (("sentence1", "sentence2"), "similarity")}

#: the output's manifest names this command: a rerun replaces its own files there
WRITER = "clear-prepare-multitask"
#: sentiment classes of each source (GLUE's SST-2: 0/1; the CS224N ids-sst: SST-5's 0-4)
SENTIMENT_CLASSES = {"glue": 2, "cs224n": 5}
#: STS scores (STS-B and the CS224N sts files: 0-5)
STS_RANGE = (0.0, 5.0)

Row = Tuple[Tuple[str, ...], float]


def _label(task: str, text: str, where: str, source: str) -> Optional[float]:
    """The row's label, None when it has none (counted); one the task does not allow is an error."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text) if text.isascii() else float("nan")  # float() reads '٣' as 3
    except ValueError:
        value = float("nan")
    if task == "sts":
        if STS_RANGE[0] <= value <= STS_RANGE[1]:
            return value
        allowed = f"a score from {STS_RANGE[0]:g} to {STS_RANGE[1]:g}"
    else:
        classes = SENTIMENT_CLASSES[source] if task == "sentiment" else 2
        if value.is_integer() and 0 <= value < classes:
            return value
        allowed = "one of " + ", ".join(map(str, range(classes)))
    shown = text if len(text) <= 40 else text[:40] + "..."
    raise PrepareError(f"{where}: {task} label {shown!r} is not {allowed}; correct or remove the row")


def read_glue(glue_dir: str, task: str, paraphrase: str, split: str, skipped: Dict[str, int]) -> List[Row]:
    name = GLUE_SOURCES.get(task, paraphrase)
    spec = get_task(name)
    path = os.path.join(glue_dir, name, f"{split}.tsv")
    if not os.path.isfile(path):
        raise PrepareError(f"--glue-dir: no {path}")
    needed = max(spec.inputs + (spec.label,)) + 1
    rows = []
    for lineno, fields in read_tsv(path, spec.header, spec.num_fields, needed, numbered=True):
        texts = tuple(fields[i].strip() for i in spec.inputs)
        label = _label(task, fields[spec.label], f"{path}:{lineno}", "glue")
        if label is None:
            skipped["no valid label"] = skipped.get("no valid label", 0) + 1
        elif not all(texts):
            skipped["empty sentence"] = skipped.get("empty sentence", 0) + 1
        else:
            rows.append((texts, label))
    return rows


def read_cs224n(directory: str, task: str, split: str, skipped: Dict[str, int]) -> Optional[List[Row]]:
    candidates = [f"{CS224N_FILES[task]}-{split}.csv"] + ([f"{CS224N_FILES[task]}-test-student.csv"] if split == "test" else [])
    path = next((os.path.join(directory, c) for c in candidates if os.path.isfile(os.path.join(directory, c))), None)
    if path is None:
        if split == "test":
            return None
        raise PrepareError(f"--cs224n-dir: no {os.path.join(directory, candidates[0])}")
    columns, label_column = CS224N_COLUMNS[task]
    rows, start = [], 1
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t")
            header = [(h or "").strip() for h in (reader.fieldnames or [])]
            missing = [c for c in columns if c not in header]
            if missing:
                raise PrepareError(f"{path}: no column {', '.join(missing)} in its header {header} (the CS224N files "
                                   "are tab-separated: an index column, id, then the sentences and the label)")
            if label_column not in header:
                return None  # the unlabelled test-student files
            start = reader.line_num + 1
            for record in reader:
                line, start = start, reader.line_num + 1  # the record's first line; the next one's
                if any("\n" in v for v in record.values() if isinstance(v, str)):
                    # the files' texts have no line breaks: a double quote left open swallowed them
                    raise PrepareError(f"{path}:{line}: a quoted field runs over lines {line}-"
                                       f"{reader.line_num} (an unclosed double quote?)")
                if None in record or None in record.values():  # more or fewer fields than the header
                    skipped["wrong number of fields"] = skipped.get("wrong number of fields", 0) + 1
                    continue
                record = {(k or "").strip(): v for k, v in record.items()}
                texts = tuple((record.get(c) or "").strip() for c in columns)
                label = _label(task, record.get(label_column) or "", f"{path}:{line}", "cs224n")
                if label is None:
                    skipped["no valid label"] = skipped.get("no valid label", 0) + 1
                elif not all(texts):
                    skipped["empty sentence"] = skipped.get("empty sentence", 0) + 1
                else:
                    rows.append((texts, label))
    except UnicodeDecodeError as e:
        raise NotUtf8Error(path, e) from None
    except csv.Error as e:  # e.g. a field over csv's field_size_limit (an unclosed quote runs to the end)
        raise PrepareError(f"{path}:{start}: unreadable as tab-separated CSV ({e})") from None
    return rows


def _subset(rows: List[Row], limit: int, seed: int) -> List[Row]:
    if limit <= 0 or limit >= len(rows):
        return rows
    keep = np.sort(np.random.default_rng(seed).permutation(len(rows))[:limit])
    return [rows[i] for i in keep]


def read_task(args, task: str) -> Dict[str, Tuple[List[Row], Dict[str, int], int]]:
    """{split: (rows, after --limit-train/--limit-valid; skipped rows by reason; rows read)} of ``task``."""
    source = args.glue_dir or args.cs224n_dir
    splits = {}
    for split, name in (("train", "train"), ("valid", "dev"), ("test", "test")):
        skipped: Dict[str, int] = {}
        if args.glue_dir:
            rows = read_glue(args.glue_dir, task, args.paraphrase, name, skipped) if split != "test" else None
        else:
            rows = read_cs224n(args.cs224n_dir, task, name, skipped)
        if rows is None:
            continue
        if not rows:
            raise PrepareError(f"{task} {split}: no row with a label and its sentences in {source} (skipped: {skipped})")
        limit = {"train": args.limit_train, "valid": args.limit_valid}.get(split, 0)
        splits[split] = (_subset(rows, limit, args.seed), skipped, len(rows))
    if "train" not in splits:
        raise PrepareError(f"{task}: no train split in {source}")
    return splits


def write_task(work: str, task: str, splits, encode_texts, pieces, dict_path: str) -> Dict:
    """Encode (``encode_texts``: texts → their ids) and binarize ``task``'s rows into ``work/task``;
    returns its splits' report."""
    encoded_splits, report = {}, {}
    for split, (rows, skipped, read) in splits.items():
        n = len(rows[0][0]) if rows else 0
        flat = encode_texts([text[k] for k in range(n) for text, _ in rows])  # every column in one pass
        encoded = [flat[k * len(rows):(k + 1) * len(rows)] for k in range(n)]
        keep = [all(len(col[i]) for col in encoded) for i in range(len(rows))]
        if keep.count(False):
            skipped["empty after tokenisation"] = keep.count(False)
        rows = [r for r, k in zip(rows, keep) if k]
        if not rows:
            raise PrepareError(f"{task} {split}: no rows left after tokenisation: {skipped}")
        encoded_splits[split] = ([[c for c, k in zip(col, keep) if k] for col in encoded], [label for _, label in rows])
        report[split] = {"rows_read": read + sum(skipped.values()) - skipped.get("empty after tokenisation", 0),
                         "rows_written": len(rows), "skipped": skipped}
    task_dir = os.path.join(work, task)
    os.makedirs(os.path.join(task_dir, "label"))
    for k in range(2 if task in PAIR_TASKS else 1):
        dest = os.path.join(task_dir, f"input{k}")
        # the encoder's ids straight into fairseq's .bin/.idx (what fairseq-preprocess writes for the
        # text of their pieces, byte for byte: tests/reliability/test_direct_binarize.py)
        direct_binarize.write_rows(dict_path, pieces, {split: cols[k] for split, (cols, _) in encoded_splits.items()},
                                   dest)
        for split, (cols, _) in encoded_splits.items():
            n = count_lines(os.path.join(dest, split))
            if n != len(cols[k]):
                raise PrepareError(f"{dest}/{split}: fairseq-preprocess wrote {n} lines for {len(cols[k])} rows")
    for split, (_, labels) in encoded_splits.items():
        with open(os.path.join(task_dir, "label", f"{split}.label"), "w", encoding="utf-8") as f:
            f.writelines((f"{int(v)}" if task != "sts" else repr(float(v))) + "\n" for v in labels)
    return report


def prepare(args) -> Dict:
    if bool(args.glue_dir) == bool(args.cs224n_dir):
        raise PrepareError("give exactly one of --glue-dir and --cs224n-dir")
    source = args.glue_dir or args.cs224n_dir
    if not os.path.isdir(source):
        raise PrepareError(f"--{'glue-dir' if args.glue_dir else 'cs224n-dir'}: '{source}' is not a directory")
    dict_path = os.path.join(args.tokenizer_from, "dict.txt")
    if not os.path.isfile(dict_path):
        raise PrepareError(f"--tokenizer-from: no dict.txt in '{args.tokenizer_from}' (give an imported model's "
                           "directory or a binarized data directory)")
    try:
        tokenizer = vocabulary.find(args.tokenizer_from, "--tokenizer-from")
    except vocabulary.TokenizerError as e:
        raise PrepareError(str(e)) from None
    check_output_dir(args.out, writer=WRITER)
    fmt = "glue" if args.glue_dir else "cs224n"
    data = {task: read_task(args, task) for task in TASKS if task in args.tasks}
    pieces = encode_mod.tokenizer_vocabulary(args.tokenizer_from, dict_path)[1]

    def encode_texts(texts):
        return encode_mod.encode_texts(args.tokenizer_from, dict_path, texts, getattr(args, "workers", 1))

    summary = {"source": os.path.abspath(source), "format": fmt, "tokenizer": tokenizer.describe(), "tasks": {}}
    with staged_output(args.out, writer=WRITER) as work:
        for task, splits in data.items():
            entry = {"splits": write_task(work, task, splits, encode_texts, pieces, dict_path)}
            if task == "sentiment":
                entry["num_classes"] = SENTIMENT_CLASSES[fmt]  # the source's classes, whichever occur
            if task == "paraphrase" and args.glue_dir:
                entry["source"] = args.paraphrase
            summary["tasks"][task] = entry
        shutil.copyfile(dict_path, os.path.join(work, "dict.txt"))
        vocabulary.copy_to(tokenizer, work, os.path.join(work, "dict.txt"))
        write_json(os.path.join(work, "multitask.json"), summary)
    return summary


def print_report(summary: Dict, out: str):
    print(f"wrote {out} ({summary['format']})")
    for task, entry in summary["tasks"].items():
        parts = []
        for split, r in entry["splits"].items():
            skipped = sum(r["skipped"].values())
            parts.append(f"{split} {r['rows_written']}" + (f" (skipped {skipped}: {r['skipped']})" if skipped else ""))
        extra = f", {entry['num_classes']} classes" if "num_classes" in entry else ""
        print(f"  {task}: " + ", ".join(parts) + extra)
