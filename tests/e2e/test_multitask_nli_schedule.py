"""examples/multitask/run.sh's sequential NLI schedules (seed 004 §5.3, Table 5): NLI=... with
NLI_ORDER=before / after, CPU form on a tiny BERT stand-in; the phases run in the stated order and
each phase's checkpoint initialises the next."""

import os
import re
import shutil

import pytest

from helpers import REPO, run_cli, synthetic_sentences
from hf_standins import make_bert
from multitask_helpers import write_glue

RUN = str(REPO / "examples" / "multitask" / "run.sh")


def write_nli(path, n=24):
    """SimCSE's nli_for_simcse.csv format: sent0,sent1,hard_neg (commas quoted as csv does)."""
    s = synthetic_sentences(3 * n, seed=11)
    rows = ["sent0,sent1,hard_neg"] + [f'"{s[i]}","{s[i + n]}, indeed","{s[i + 2 * n]}"' for i in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("nli_schedule")
    return make_bert(root / "bert"), write_glue(root, sizes=(("train", 32), ("dev", 16))), write_nli(root / "nli.csv")


def run(inputs, out, order):
    bert, glue, nli = inputs
    # PRETRAIN_DATA=quora: the 3 datasets' pre-training as one phase (Table 4's "Quora Only"; the default
    # "3 Given" phases are test_multitask_faithful's)
    env = {"CPU": "1", "PARAPHRASE": "MRPC", "NLI": str(nli), "NLI_ORDER": order, "LIMIT": "32",
           "LIMIT_PAIRS": "32", "EPOCHS": "1", "PRETRAIN_EPOCHS": "1", "PRETRAIN_DATA": "quora", "PYTHON": "python"}
    return run_cli(["bash", RUN, bert, glue, out], env=env, timeout=1200).stdout


def phases(stdout):
    return re.findall(r"^recipe: phase (\S+) from (\S+)$", stdout, flags=re.M)


@pytest.mark.parametrize("order", ["before", "after"])
def test_nli_phase_runs_before_or_after_the_three_datasets(inputs, tmp_path, order):
    out = tmp_path / "out"
    stdout = run(inputs, out, order)
    seen = phases(stdout)
    names = [n for n, _ in seen]
    expected = (["pretrain-nli", "pretrain"] if order == "before" else ["pretrain", "pretrain-nli"]) + ["finetune"]
    assert names == expected, stdout[-3000:]
    # each phase starts from the previous one's checkpoint_last.pt (the first from the import)
    starts = [s for _, s in seen]
    assert starts[0] == str(out / "model" / "model.pt")
    for (prev, _), start in zip(seen, starts[1:]):
        assert start == str(out / prev / "checkpoint_last.pt")
    for (name, start) in seen:
        log = (out / name / "train.log").read_text()
        assert f"loading pretrained model from {start}" in log, name  # fairseq's --finetune-from-model
    # the NLI phase trained on the NLI pairs with their hard negatives, the other on MRPC's signed pairs
    nli_log = (out / "pretrain-nli" / "train.log").read_text()
    assert str(out / "nli-pairs") in nli_log and "negative_pairs': True" not in nli_log
    assert os.path.isfile(out / "eval.json")

    # a rerun with the other order over the same OUT refuses to reuse checkpoints trained from another start
    other = "after" if order == "before" else "before"
    bert, glue, nli = inputs
    proc = run_cli(["bash", RUN, bert, glue, out], env={"CPU": "1", "PARAPHRASE": "MRPC", "NLI": str(nli),
                   "NLI_ORDER": other, "LIMIT": "32", "LIMIT_PAIRS": "32", "EPOCHS": "1", "PRETRAIN_EPOCHS": "1",
                   "PRETRAIN_DATA": "quora"},
                   check=False)
    assert proc.returncode == 1 and proc.stdout.strip().splitlines()[-1].startswith("error: ")
    assert "NLI_ORDER changed?" in proc.stdout
    shutil.rmtree(out)


def test_bad_nli_knobs_fail_with_one_line_before_any_work(inputs, tmp_path):
    bert, glue, nli = inputs
    proc = run_cli(["bash", RUN, bert, glue, tmp_path / "o"], env={"CPU": "1", "PARAPHRASE": "MRPC",
                   "NLI": str(nli), "NLI_ORDER": "during"}, check=False)
    assert proc.returncode == 1 and proc.stdout.strip() == "error: NLI_ORDER must be before or after, got 'during'"
    proc = run_cli(["bash", RUN, bert, glue, tmp_path / "o"], env={"CPU": "1", "PARAPHRASE": "MRPC",
                   "NLI": str(tmp_path / "none.csv")}, check=False)
    assert proc.returncode == 1 and proc.stdout.strip().startswith("error: NLI file")
    assert not (tmp_path / "o").exists()
