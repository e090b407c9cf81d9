"""GLUE fine-tuning helpers for fairseq's ``sentence_prediction`` task (the GLUE files' columns
and reader: ``preprocessing/glue_data.py``).

Used by ``examples/glue/prepare.sh`` and ``examples/glue/finetune.sh``:

* ``python -m fairseq_clear.cli.glue split GLUE_DIR TASK SPM OUT`` —
  GLUE tsv files → sentencepiece-encoded ``SPLIT.input0``/``SPLIT.input1``
  and ``SPLIT.label`` text files (the columns of fairseq's
  examples/roberta/preprocess_GLUE_tasks.sh), ready for fairseq-preprocess.
* ``... settings TASK DATA_BIN`` — fairseq's fine-tuning settings of
  examples/roberta/README.glue.md for TASK as shell variables (``--cpu``:
  the CPU-sized variant).
* ``... model-args CHECKPOINT`` — the ``--arch`` and size flags that rebuild
  the checkpoint's encoder (fine-tuning builds the model from the command
  line, then loads the weights): ``continued.model_args``, which every recipe
  that starts from a checkpoint reads too.
* ``... summarize LOG TASK`` — the GLUE dev metric of every validation in a
  fairseq-train JSON log and the best one.

Metrics are GLUE's: accuracy; the mean of accuracy and F1 (MRPC, QQP); the
mean of Pearson and Spearman (STS-B); Matthews correlation (CoLA).
fairseq's ``sentence_prediction`` criterion already logs them on the valid
set with ``--report-acc-and-f1``, ``--report-pearson-and-spearman`` and
``--report-mcc`` (``settings`` passes the right flag); ``glue_metrics``
computes the same from predictions with fairseq's own functions.
"""

import math
import os
from typing import Dict, List, Optional

import numpy as np

from ...preprocessing.glue_data import GlueDataError, get_task, read_tsv
from ..training_log import records


#: criterion flags that make fairseq log the GLUE metric
REPORT_FLAGS = {"acc_and_f1": "--report-acc-and-f1", "mcc": "--report-mcc",
                "pearson_and_spearman": "--report-pearson-and-spearman", "accuracy": ""}
#: the split's output manifest names this command: a rerun replaces its own files there
SPLIT_WRITER = "clear-glue split"
#: the writer of examples/glue/prepare.sh's TASK-bin folders (clear-glue publish)
BIN_WRITER = "examples/glue/prepare.sh"


def publish(built: str, out_dir: str, check_only: bool = False) -> None:
    """Move the binarized task folder ``built`` into ``out_dir`` through the export's output
    directory (a rerun replaces the files of the previous one, removes what it no longer writes,
    and leaves everything else there; a kill leaves whole files); ``check_only``: refuse, before
    any work, an ``out_dir`` that is not empty and not ours."""
    import shutil

    from fairseq_clear.export.output_dir import check_output_dir, staged_output

    check_output_dir(out_dir, writer=BIN_WRITER, option="OUT_DIR/TASK-bin")
    if check_only:
        return
    if not os.path.isdir(built):
        raise GlueDataError(f"'{built}' is not a directory to publish")
    with staged_output(out_dir, writer=BIN_WRITER, option="OUT_DIR/TASK-bin", remove_unwritten=True) as staging:
        for name in os.listdir(built):
            shutil.move(os.path.join(built, name), os.path.join(staging, name))
    os.rmdir(built)


# ---- metrics ---------------------------------------------------------------------

def glue_metrics(task: str, preds, labels) -> Dict[str, float]:
    """GLUE dev metrics x100 for ``task``; ``score`` is the one GLUE (and Table 1) reports.

    The same functions fairseq's sentence_prediction criterion logs with.
    """
    from fairseq.criterions.sentence_prediction import (
        acc_and_f1, matthews_corrcoef, pearson_and_spearman, simple_accuracy,
    )

    spec = get_task(task)
    preds, labels = np.asarray(preds), np.asarray(labels)
    if spec.metric == "pearson_and_spearman":
        out = pearson_and_spearman(preds, labels)
        out = {"pearson": out["pearson"], "spearman": out["spearmanr"], "pearson_and_spearman": out["corr"]}
    elif spec.metric == "acc_and_f1":
        out = acc_and_f1(preds, labels)
        out = {"accuracy": out["acc"], "f1": out["f1"], "acc_and_f1": out["acc_and_f1"]}
    elif spec.metric == "mcc":
        out = {"accuracy": simple_accuracy(preds, labels), "mcc": matthews_corrcoef(preds, labels)}
    else:
        out = {"accuracy": simple_accuracy(preds, labels)}
    out = {k: 100.0 * float(v) for k, v in out.items()}
    out["score"] = out[spec.metric]
    return out


# ---- data ------------------------------------------------------------------------

def split_task(glue_dir: str, task: str, tokenizer_source: str, out_dir: str, bin_dir: str = "",
               dict_path: str = "") -> Dict[str, int]:
    """Write OUT/SPLIT.input{0,1} (dict.txt symbols) and OUT/SPLIT.label for each split; with
    ``bin_dir``, also BIN/input{0,1}/ as ``fairseq-preprocess --only-source --srcdict dict_path`` of
    those files writes them (train, valid, valid1, test, test1), from the encoder's ids directly.

    ``tokenizer_source``: a sentencepiece model, or a data or model directory whose
    tokenizer (sentencepiece, GPT-2 BPE, WordPiece) and dict.txt encode the text.
    Splits are train, the task's dev split(s) and test (if present); returns
    the number of examples per split. OUT is written through the export's output directory
    (export/output_dir.py): built beside it and moved in when complete; a rerun replaces the files
    of the previous one (and removes a test split it no longer writes), nothing else there.
    """
    from fairseq_clear.export.output_dir import check_output_dir, staged_output
    from fairseq_clear.preprocessing.encode import tokenizer_vocabulary

    spec = get_task(task)
    if not os.path.exists(tokenizer_source):
        raise GlueDataError(f"tokenizer '{tokenizer_source}' does not exist")
    check_output_dir(out_dir, writer=SPLIT_WRITER, option="OUT")
    encode_ids, symbols = tokenizer_vocabulary(tokenizer_source)[:2]
    counts, names = {}, {}  # names: (input column, train/valid/test) -> fairseq's names written
    test_splits = [d.replace("dev", "test") for d in spec.dev_splits]  # MNLI: test_matched, ...
    splits = ["train", *spec.dev_splits, *test_splits]
    task_dir = os.path.join(glue_dir, task)
    with staged_output(out_dir, writer=SPLIT_WRITER, option="OUT", remove_unwritten=True) as staging:
        for split in splits:
            path = os.path.join(task_dir, f"{split}.tsv")
            if split.startswith("test") and not os.path.isfile(path):
                continue
            is_test = split.startswith("test")
            columns = spec.test_inputs if is_test else spec.inputs
            label_col = None if is_test else (spec.dev_label if split != "train" and spec.dev_label is not None else spec.label)
            needed = max(columns + ((label_col,) if label_col is not None else ())) + 1
            # CoLA's test.tsv has a header although its train/dev do not
            rows = read_tsv(path, spec.header or is_test, None if is_test else spec.num_fields, needed)
            for i, col in enumerate(columns):
                ids = [encode_ids(r[col]) for r in rows]
                with open(os.path.join(staging, f"{split}.input{i}"), "w", encoding="utf-8") as f:
                    for line in ids:
                        f.write(" ".join(symbols[t] for t in line) + "\n")
                if bin_dir:
                    from fairseq_clear.preprocessing import direct_binarize

                    # fairseq-preprocess's names: --validpref/--testpref a,b -> valid, valid1 (test, test1)
                    kind = "train" if split == "train" else "test" if is_test else "valid"
                    named = names.setdefault((i, kind), [])
                    named.append(kind if not named else f"{kind}{len(named)}")
                    direct_binarize.write_rows(dict_path, symbols, {named[-1]: ids}, os.path.join(bin_dir, f"input{i}"))
            if label_col is not None:
                with open(os.path.join(staging, f"{split}.label"), "w", encoding="utf-8") as f:
                    for r in rows:
                        label = r[label_col].strip()
                        if spec.regression:
                            # README.glue.md / preprocess_GLUE_tasks.sh: STS-B scores scaled to [0, 1]
                            try:
                                label = repr(float(label) / 5.0)
                            except ValueError:
                                raise GlueDataError(f"{path}: score '{label}' is not a number") from None
                        f.write(label + "\n")
            counts[split] = len(rows)
    return counts


def num_examples(data_bin: str, split: str = "train") -> int:
    from fairseq.data import data_utils

    ds = data_utils.load_indexed_dataset(os.path.join(data_bin, "input0", split), None)
    if ds is None:
        raise GlueDataError(f"no binarized {split} split in '{data_bin}/input0' (run examples/glue/prepare.sh)")
    return len(ds)


def settings(task: str, data_bin: Optional[str] = None, cpu: bool = False,
             batch_size: Optional[int] = None, max_epoch: Optional[int] = None) -> Dict[str, str]:
    """fairseq's README.glue.md settings for ``task``; the CPU variant uses 3 epochs.

    README's ``--total-num-update`` assumes 10 epochs at its batch size; when the
    batch size or the epochs differ (or the task is not in README), it is
    recomputed from the training set size, with 6% warm-up as in README.
    """
    spec = get_task(task)
    batch = batch_size or spec.batch_size
    epochs = max_epoch or (3 if cpu else 10)
    total, warmup = spec.total_updates, spec.warmup_updates
    if total is None or batch != spec.batch_size or epochs != 10:
        if data_bin is None:
            raise GlueDataError(f"{task}: the data directory is needed to count updates")
        total = math.ceil(num_examples(data_bin) / batch) * epochs
        warmup = max(1, round(0.06 * total))
    best = spec.metric
    maximize = True
    if spec.regression:
        best, maximize = "loss", False  # README.glue.md: STS-B keeps the lowest-loss checkpoint
    criterion = ["--regression-target"] if spec.regression else []
    if REPORT_FLAGS[spec.metric]:
        criterion.append(REPORT_FLAGS[spec.metric])
    return {
        "NUM_CLASSES": str(spec.num_classes),
        "LR": f"{spec.lr:g}",
        "MAX_SENTENCES": str(batch),
        "MAX_EPOCH": str(epochs),
        "TOTAL_NUM_UPDATES": str(total),
        "WARMUP_UPDATES": str(warmup),
        "BEST_METRIC": best,
        "MAXIMIZE": "--maximize-best-checkpoint-metric" if maximize else "",
        "CRITERION_ARGS": " ".join(criterion),
        "GLUE_METRIC": spec.metric,
        # MNLI: matched and mismatched are both validated; the best checkpoint follows the first
        "VALID_SUBSETS": ",".join(spec.valid_subsets),
    }


def read_valid_records(log_path: str, subset: str = "valid") -> List[dict]:
    """The JSON records fairseq-train logged for ``subset`` (``--log-format json``)."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        return records(f, subset)


def summarize(log_path: str, task: str, subset: Optional[str] = None) -> dict:
    """GLUE dev metric per validation and the best (as Table 1 reports: best dev score).

    MNLI (two dev splits, matched and mismatched) reports both at every validation and their
    mean, which Table 1 gives; the best validation is the one with the best mean.
    """
    spec = get_task(task)
    subsets = (subset,) if subset else spec.valid_subsets
    per_subset = []
    for name in subsets:
        key = f"{name}_{spec.metric}"
        rows = {}
        for r in read_valid_records(log_path, name):
            if key in r:
                updates = int(r.get(f"{name}_num_updates", 0))
                rows[updates] = {"epoch": int(r.get("epoch", 0)), "num_updates": updates,
                                 spec.metric: _finite_or_none(r[key])}
        if not rows:
            raise GlueDataError(
                f"{log_path}: no '{key}' in the {name} records (was it written with --log-format json, "
                f"--valid-subset {','.join(spec.valid_subsets)} and {REPORT_FLAGS[spec.metric] or 'a classification task'}?)"
            )
        per_subset.append(rows)
    if len(per_subset) == 1:
        rows = list(per_subset[0].values())
        return {"task": task, "metric": spec.metric, "validations": rows, "best": _best(rows, spec.metric, log_path)}
    common = sorted(set.intersection(*(set(r) for r in per_subset)))
    rows = []
    for updates in common:
        values = {split: per_subset[i][updates][spec.metric] for i, split in enumerate(spec.dev_splits)}
        rows.append({"epoch": per_subset[0][updates]["epoch"], "num_updates": updates, **values,
                     spec.metric: None if None in values.values() else float(np.mean(list(values.values())))})
    best = _best(rows, spec.metric, log_path)
    return {"task": task, "metric": spec.metric, "dev_splits": list(spec.dev_splits),
            "validations": rows, "best": best}


def _finite_or_none(value):
    """A logged metric as a float; None (no score) when it is NaN/Inf or not a number."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _best(rows, metric, log_path):
    """The best validation among those with a finite score (a NaN is never the best, nor reported)."""
    scored = [r for r in rows if r[metric] is not None]
    if not scored:
        raise GlueDataError(f"{log_path}: every validation's {metric} is NaN/Inf or missing: no dev score "
                            "to report (did the fine-tuning diverge?)")
    return max(scored, key=lambda r: r[metric])


def copy_tokenizer(source: str, dest: str) -> None:
    """Copy a data or model directory's tokenizer files and record (or a sentencepiece model) to ``dest``."""
    from ... import vocabulary

    tok = (vocabulary.SentencepieceTokenizer(source) if os.path.isfile(source)
           else vocabulary.detect(source))
    if tok is None:
        raise GlueDataError(f"no tokenizer in '{source}'")
    vocabulary.copy_to(tok, dest)
