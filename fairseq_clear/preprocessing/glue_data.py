"""GLUE's tsv files: each task's columns and fairseq's fine-tuning settings (``TASKS``), and the
one reader of their rows (``read_tsv``), used by clear-glue (evaluation/glue/) and by seed 004's
clear-prepare-multitask."""

import os
import sys
from dataclasses import dataclass
from typing import Dict, Optional

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

class GlueDataError(FairseqClearError, ValueError):
    """A GLUE file is missing or malformed; the message names file and line."""


def get_task(name: str) -> GlueTask:
    if name not in TASKS:
        raise GlueDataError(f"unknown GLUE task '{name}', choose from {', '.join(TASKS)}")
    return TASKS[name]


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
