"""GLUE fine-tuning helpers for fairseq's ``sentence_prediction`` task.

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
  line, then loads the weights).
* ``... summarize LOG TASK`` — the GLUE dev metric of every validation in a
  fairseq-train JSON log and the best one.

Metrics are GLUE's: accuracy; the mean of accuracy and F1 (MRPC, QQP); the
mean of Pearson and Spearman (STS-B); Matthews correlation (CoLA).
fairseq's ``sentence_prediction`` criterion already logs them on the valid
set with ``--report-acc-and-f1``, ``--report-pearson-and-spearman`` and
``--report-mcc`` (``settings`` passes the right flag); ``glue_metrics``
computes the same from predictions with fairseq's own functions.
"""

import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np
from ..errors import FairseqClearError, NotUtf8Error


@dataclass(frozen=True)
class GlueTask:
    """Columns (0-based) of the GLUE tsv files and fairseq's fine-tuning settings."""

    inputs: tuple            # sentence columns of train/dev
    test_inputs: tuple       # sentence columns of test
    label: Optional[int]     # label column of train (and dev unless dev_label)
    num_classes: int
    lr: float
    batch_size: int
    total_updates: Optional[int]  # README.glue.md: 10 epochs at batch_size
    warmup_updates: Optional[int]
    metric: str              # the GLUE metric, as the criterion logs it
    header: bool = True      # train/dev start with a header (CoLA's do not)
    dev_label: Optional[int] = None
    num_fields: Optional[int] = None  # keep only lines with this many fields (QQP)
    dev_splits: tuple = ("dev",)

    @property
    def regression(self) -> bool:
        return self.num_classes == 1

    @property
    def valid_subsets(self) -> tuple:
        """fairseq's names of the dev splits (prepare.sh binarizes them as valid, valid1, ...)."""
        return tuple("valid" if i == 0 else f"valid{i}" for i in range(len(self.dev_splits)))


#: fairseq's examples/roberta/README.glue.md settings (WNLI is not in it: RTE's, scaled)
TASKS: Dict[str, GlueTask] = {
    "MNLI": GlueTask((8, 9), (8, 9), 11, 3, 1e-5, 32, 123873, 7432, "accuracy",
                     dev_label=15, dev_splits=("dev_matched", "dev_mismatched")),
    "QNLI": GlueTask((1, 2), (1, 2), 3, 2, 1e-5, 32, 33112, 1986, "accuracy"),
    "QQP": GlueTask((3, 4), (1, 2), 5, 2, 1e-5, 32, 113272, 28318, "acc_and_f1", num_fields=6),
    "RTE": GlueTask((1, 2), (1, 2), 3, 2, 2e-5, 16, 2036, 122, "accuracy"),
    "SST-2": GlueTask((0,), (1,), 1, 2, 1e-5, 32, 20935, 1256, "accuracy"),
    "MRPC": GlueTask((3, 4), (3, 4), 0, 2, 1e-5, 16, 2296, 137, "acc_and_f1"),
    "CoLA": GlueTask((3,), (1,), 1, 2, 1e-5, 16, 5336, 320, "mcc", header=False),
    "STS-B": GlueTask((7, 8), (7, 8), 9, 1, 2e-5, 16, 3598, 214, "pearson_and_spearman"),
    "WNLI": GlueTask((1, 2), (1, 2), 3, 2, 2e-5, 16, None, None, "accuracy"),
}
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


class GlueDataError(FairseqClearError, ValueError):
    """A GLUE file is missing or malformed; the message names file and line."""


def get_task(name: str) -> GlueTask:
    if name not in TASKS:
        raise GlueDataError(f"unknown GLUE task '{name}', choose from {', '.join(TASKS)}")
    return TASKS[name]


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

def read_tsv(path: str, header: bool, num_fields: Optional[int], needed: int, numbered: bool = False):
    """Rows of a GLUE tsv (fields split on tabs only: GLUE text has quotes); ``numbered``: each
    as (line number, fields)."""
    if not os.path.isfile(path):
        raise GlueDataError(f"GLUE file '{path}' does not exist")
    try:
        rows, skipped = _read_tsv_rows(path, header, num_fields, needed, numbered)
    except UnicodeDecodeError as e:
        raise NotUtf8Error(path, e) from None
    if skipped:
        print(f"{path}: skipped {len(skipped)} lines without {num_fields} fields "
              f"(first: line {skipped[0]})", file=sys.stderr)
    return rows


def _read_tsv_rows(path: str, header: bool, num_fields: Optional[int], needed: int, numbered: bool = False):
    rows, skipped = [], []
    with open(path, encoding="utf-8-sig") as f:  # MRPC files start with a BOM
        for lineno, line in enumerate(f, start=1):
            if header and lineno == 1:
                continue
            fields = line.rstrip("\n").rstrip("\r").split("\t")
            if num_fields is not None and len(fields) != num_fields:
                skipped.append(lineno)  # fairseq's script drops these QQP lines too
                continue
            if len(fields) < needed:
                raise GlueDataError(
                    f"{path}:{lineno}: expected at least {needed} tab-separated columns, found {len(fields)}"
                )
            rows.append((lineno, fields) if numbered else fields)
    return rows, skipped


def split_task(glue_dir: str, task: str, tokenizer_source: str, out_dir: str) -> Dict[str, int]:
    """Write OUT/SPLIT.input{0,1} (dict.txt symbols) and OUT/SPLIT.label for each split.

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
    counts = {}
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
                with open(os.path.join(staging, f"{split}.input{i}"), "w", encoding="utf-8") as f:
                    for r in rows:
                        f.write(" ".join(symbols[t] for t in encode_ids(r[col])) + "\n")
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


def model_args(checkpoint: str) -> List[str]:
    """Command-line flags that rebuild the encoder of ``checkpoint`` (arch, sizes, positions)."""
    import fairseq_clear  # noqa: F401  (allow-listed, weights_only loading)
    from fairseq_clear.checkpoint_safety import safe_load

    if not os.path.isfile(checkpoint):
        raise GlueDataError(f"checkpoint '{checkpoint}' does not exist")
    state = safe_load(checkpoint)
    cfg = state.get("cfg") or {}
    model = cfg.get("model") if hasattr(cfg, "get") else None
    if model is None and state.get("args") is not None:
        model = state["args"]
    get = (lambda k, d=None: model.get(k, d)) if hasattr(model, "get") else (lambda k, d=None: getattr(model, k, d))
    from fairseq_clear.checkpoint_safety import stock_roberta_names

    arch = get("_name") or get("arch")
    if arch in stock_roberta_names():
        arch = "clear_roberta"  # fairseq's own RoBERTa (roberta.base as shipped): same encoder
    if not arch or not str(arch).startswith("clear_roberta"):
        raise GlueDataError(f"{checkpoint}: not a clear_roberta or fairseq RoBERTa checkpoint (arch '{arch}')")
    max_positions = get("max_positions") or get("tokens_per_sample")
    if max_positions is None and hasattr(cfg, "get") and cfg.get("task") is not None:
        max_positions = cfg["task"].get("tokens_per_sample")
    from fairseq.utils import get_available_activation_fns

    from fairseq_clear.checkpoint_safety import UnsupportedCheckpointError, accepted_model_names, check_checkpoint_config
    from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_sizes

    try:
        check_checkpoint_config(state, checkpoint)
        check_sizes(state, checkpoint)  # the flags below rebuild the model: nothing larger than its weights
    except (UnsupportedCheckpointError, CheckpointSizeError) as e:
        raise GlueDataError(str(e)) from None

    from fairseq_clear.checkpoint_sizes import CheckpointValueError, option_value

    def checked(field, value, kind):
        try:
            return option_value(checkpoint, field, value, kind)
        except CheckpointValueError as e:
            raise GlueDataError(str(e)) from None

    flags = [
        "--arch", checked("arch", arch, accepted_model_names()),
        "--encoder-layers", checked("encoder_layers", get("encoder_layers"), int),
        "--encoder-embed-dim", checked("encoder_embed_dim", get("encoder_embed_dim"), int),
        "--encoder-ffn-embed-dim", checked("encoder_ffn_embed_dim", get("encoder_ffn_embed_dim"), int),
        "--encoder-attention-heads", checked("encoder_attention_heads", get("encoder_attention_heads"), int),
        "--activation-fn", checked("activation_fn", get("activation_fn", "gelu"), get_available_activation_fns()),
        "--max-positions", checked("max_positions", max_positions, int),
    ]
    if get("layernorm_eps") is not None:
        flags += ["--layernorm-eps", checked("layernorm_eps", get("layernorm_eps"), float)]  # BERT's 1e-12
    if get("encoder_normalize_before", False):
        flags.append("--encoder-normalize-before")
    if get("untie_weights_roberta", False):
        flags.append("--untie-weights-roberta")
    # what the starting model is (clear-import-hf's record), carried into the trained checkpoint
    from fairseq_clear.models.pooling import POOLING_CHOICES, PRETRAINED_KINDS

    from fairseq_clear.checkpoint_safety import stock_roberta_names

    kind = get("pretrained_kind") or ("encoder" if (get("_name") or get("arch")) in stock_roberta_names() else None)
    if kind:
        flags += ["--pretrained-kind", checked("pretrained_kind", kind, PRETRAINED_KINDS)]
    if get("pretrained_pooling"):
        flags += ["--pretrained-pooling", checked("pretrained_pooling", get("pretrained_pooling"), POOLING_CHOICES)]
    if get("sentence_normalize", False):
        flags.append("--sentence-normalize")
    return flags


def read_valid_records(log_path: str, subset: str = "valid") -> List[dict]:
    """The JSON records fairseq-train logged for ``subset`` (``--log-format json``)."""
    records = []
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if f"| {subset} |" in line and "{" in line:
                try:
                    records.append(json.loads(line[line.index("{"):]))
                except json.JSONDecodeError:
                    continue
    return records


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
    from .. import vocabulary

    tok = (vocabulary.SentencepieceTokenizer(source) if os.path.isfile(source)
           else vocabulary.detect(source))
    if tok is None:
        raise GlueDataError(f"no tokenizer in '{source}'")
    vocabulary.copy_to(tok, dest)
