"""fairseq's log has one reader (``training_log.records``): clear-plot's, GLUE's summary, the
benchmarks' and the tests' give the same records from one log."""

import importlib.util

from fairseq_clear.evaluation.glue.finetune import read_valid_records
from fairseq_clear.evaluation.training_log import read_log, records
from harness.runs import logged
from helpers import REPO

LOG = """\
2026-01-01 00:00:00 | INFO | fairseq.tasks | loaded 10 sentences | train_inner
2026-01-01 00:00:01 | INFO | train_inner | {"epoch": 1, "loss": "5.1", "num_updates": "1", "wall": "3"}
[2026-01-01 00:00:02,000][train_inner][INFO] - {"epoch": 1, "loss": "4.9", "num_updates": "2", "wall": "5"}
2026-01-01 00:00:03 | INFO | valid | {"epoch": 1, "valid_loss": "4.8", "valid_num_updates": "2"}
2026-01-01 00:00:04 | INFO | train_inner | {"epoch": 1, "loss": "4.
2026-01-01 00:00:05 | INFO | train | {"epoch": 1, "train_loss": "4.9", "num_updates": "2", "wall": "9"}
2026-01-01 00:00:06 | INFO | valid1 | {"epoch": 1, "valid1_loss": "5.0", "valid1_num_updates": "2"}
2026-01-01 00:00:07 | INFO | train_inner | epoch 001:      3 / 10 loss=4.5, num_updates=3
"""
FIRST = {"epoch": 1, "loss": "5.1", "num_updates": "1", "wall": "3"}
SECOND = {"epoch": 1, "loss": "4.9", "num_updates": "2", "wall": "5"}
SIMPLE = {"loss": 4.5, "num_updates": 3.0}
END = {"epoch": 1, "train_loss": "4.9", "num_updates": "2", "wall": "9"}


def _benchmarks_common():
    spec = importlib.util.spec_from_file_location("bench_common_for_test", REPO / "benchmarks" / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_reader_of_the_log_gives_the_same_records(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG, encoding="utf-8")
    lines = LOG.splitlines()
    # a line cut by a crash is skipped; json, fairseq-hydra-train's and simple lines are read
    assert records(lines) == [FIRST, SECOND, SIMPLE]
    assert records(lines, "train_inner", "train") == [FIRST, SECOND, END, SIMPLE]
    assert logged(LOG) == records(lines) and logged(LOG, "valid") == records(lines, "valid")
    assert _benchmarks_common().log_records(path, ("train_inner", "train")) == [FIRST, SECOND, END, SIMPLE]
    assert _benchmarks_common().log_records(tmp_path / "absent.log") == []
    assert read_valid_records(str(path), "valid1") == [{"epoch": 1, "valid1_loss": "5.0", "valid1_num_updates": "2"}]
    assert read_log(str(path)) == {"train": [FIRST, SECOND, SIMPLE],
                                   "valid": [{"epoch": 1, "loss": "4.8", "num_updates": "2"}]}
