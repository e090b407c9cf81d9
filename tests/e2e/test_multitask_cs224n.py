"""clear-prepare-multitask --cs224n-dir on fixtures in the CS224N default project's format
(tests/support/data/cs224n; the reader itself: tests/unit/test_cs224n_reader.py)."""

import json
import shutil
import sys
from pathlib import Path

from helpers import make_binarized, run_cli, synthetic_sentences

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "data" / "cs224n"


def test_prepare_from_cs224n_csvs_and_its_one_line_error(tmp_path):
    tokenizer = make_binarized(tmp_path / "spm", synthetic_sentences(200, 0), synthetic_sentences(20, 1))
    out = tmp_path / "mt"
    prepare = [sys.executable, "-m", "fairseq_clear.cli.prepare_multitask", "--tokenizer-from", tokenizer]
    run_cli(prepare + ["--cs224n-dir", FIXTURES, "--out", out])
    summary = json.loads((out / "multitask.json").read_text())
    assert summary["format"] == "cs224n"
    tasks = summary["tasks"]
    assert tasks["sentiment"]["num_classes"] == 5  # SST's 0-4
    for task, (train, valid) in {"sentiment": (5, 2), "paraphrase": (4, 2), "sts": (4, 2)}.items():
        splits = tasks[task]["splits"]
        assert set(splits) == {"train", "valid"}  # the -test-student files carry no labels
        assert (splits["train"]["rows_written"], splits["valid"]["rows_written"]) == (train, valid)
    assert (out / "sentiment" / "label" / "train.label").read_text().split() == ["4", "2", "0", "3", "1"]
    assert (out / "paraphrase" / "label" / "train.label").read_text().split() == ["1", "0", "1", "0"]
    assert [float(x) for x in (out / "sts" / "label" / "train.label").read_text().split()] == [0.2, 4.6, 3.333, 5.0]
    assert (out / "sts" / "input1" / "valid.bin").is_file()

    bad = tmp_path / "bad"
    shutil.copytree(FIXTURES, bad)
    (bad / "sts-train.csv").write_text("id,sentence1,sentence2,similarity\n1,A,B,2.0\n", encoding="utf-8")
    proc = run_cli(prepare + ["--cs224n-dir", bad, "--out", tmp_path / "mt2"], check=False)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 2 and lines[-1].startswith("error: ") and "sts-train.csv: no column" in lines[-1]
    assert "Traceback" not in proc.stdout
