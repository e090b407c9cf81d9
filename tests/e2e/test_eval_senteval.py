"""clear-eval-senteval: SentEval's transfer and probing tasks (DeCLUTR's Table 1) for any encoder,
end to end on the data that is here (GLUE SST-2 and MRPC, SICK, STS-B of ../shared/data), its
vector cache, and its errors."""

import json
import math
import shutil
import sys

import numpy as np
import pytest

from helpers import run_cli, shared
from senteval_reference_data import write_toy_senteval_tree

from fairseq_clear.evaluation.senteval import classifier as sc
from fairseq_clear.evaluation.senteval.data import read_senteval_task
from fairseq_clear.evaluation.senteval.transfer import VectorCache, evaluate_transfer, score_task, table_of

COMMAND = [sys.executable, "-m", "fairseq_clear.cli.eval_senteval"]


@pytest.fixture(scope="module")
def probing_only(tmp_path_factory):
    """A SentEval data folder holding only probing/past_present.txt (the toy Tense task)."""
    root = tmp_path_factory.mktemp("senteval_probing")
    write_toy_senteval_tree(root)
    shutil.rmtree(root / "downstream")
    return root


def test_the_command_runs_end_to_end_on_the_data_here_and_reuses_its_vectors(ckpt, probing_only, tmp_path):
    glue, sts = shared("glue", "glue_data"), shared("sts")
    checkpoint, data = ckpt
    out = tmp_path / "table.json"
    args = COMMAND + ["--checkpoint", checkpoint, "--data", data, "--cpu", "--glue-data", glue, "--sts-dir", sts,
                      "--senteval-data", probing_only, "--tasks", "STS12,SST2,MRPC,SICK-E,SICK-R,STS-B,Tense",
                      "--max-examples", "150", "--config", "prototyping", "--output", out]
    proc = run_cli(args)
    report = json.loads(out.read_text())
    row = report["models"][checkpoint.stem]["mean"]
    tasks = ["STS12", "SST2", "MRPC", "SICK-E", "SICK-R", "STS-B", "Tense"]
    assert list(report["tasks"]) == tasks and report["classifier"]["optim"] == "rmsprop"
    assert set(row["table"]) == set(tasks) | {"Downstream", "Probing", "Avg"}
    assert all(math.isfinite(v) for v in row["table"].values())
    assert row["table"]["Downstream"] == pytest.approx(np.mean([row["table"][t] for t in tasks[:6]]))
    assert row["table"]["Avg"] == pytest.approx((row["table"]["Downstream"] + row["table"]["Tense"]) / 2)
    assert row["tasks"]["MRPC"]["source"].endswith("MRPC") and "f1" in row["tasks"]["MRPC"]
    # DeCLUTR's scores: Spearman for the regressor's tasks, MRPC's accuracy and F1 averaged, STS12 by subsets
    assert row["tasks"]["SICK-R"]["score"] == row["tasks"]["SICK-R"]["spearman"]
    mrpc = row["tasks"]["MRPC"]
    assert mrpc["score"] == pytest.approx((mrpc["acc"] + mrpc["f1"]) / 2)
    sts12 = row["tasks"]["STS12"]
    assert len(sts12["subsets"]) == 5 and sts12["score"] == pytest.approx(np.mean(list(sts12["subsets"].values())))
    assert "GLUE SST-2" in report["notes"]["SST2"]
    assert not any(t["cached"] for t in row["times"].values())
    for line in ("Downstream", "Probing", "Avg", f"{checkpoint.stem}-mean", "SICK-E"):
        assert line in proc.stdout
    assert "[7/7] Tense" in proc.stdout  # progress, per task

    # another classifier setting: the vectors come from the cache, nothing is embedded again
    proc = run_cli(args[:-2] + ["--nhid", "8", "--output", tmp_path / "mlp.json"] +
                   ["--cache-dir", str(out)[:-5] + ".vectors"])
    again = json.loads((tmp_path / "mlp.json").read_text())["models"][checkpoint.stem]["mean"]
    assert all(t["cached"] for t in again["times"].values()) and "from the vector cache" in proc.stdout
    assert again["tasks"]["SICK-R"]["pearson"] == row["tasks"]["SICK-R"]["pearson"]  # the regressor: same vectors


def test_errors_are_one_line_naming_the_folder_or_option(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    proc = run_cli(COMMAND + ["--model", tmp_path, "--senteval-data", empty, "--tasks", "CR", "--output",
                              tmp_path / "o.json"], check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout
    assert f"error: CR: folder '{empty / 'downstream' / 'CR'}' is missing" in proc.stdout
    assert "get_transfer_data.bash" in proc.stdout
    for extra, message in ((["--optim", "sgd"], "sgd needs a learning rate"),
                           (["--tasks", "COCO"], "unknown task 'COCO'"),
                           (["--classifier-batch-size", "0"], "--classifier-batch-size must be >= 1")):
        proc = run_cli(COMMAND + ["--model", tmp_path, "--senteval-data", empty, "--output", tmp_path / "o.json"]
                       + extra, check=False)
        assert proc.returncode == 2 and message in proc.stdout and "Traceback" not in proc.stdout, proc.stdout
    proc = run_cli(COMMAND + ["--model", tmp_path, "--output", tmp_path / "o.json"], check=False)
    assert proc.returncode == 2 and "give --senteval-data" in proc.stdout


def test_library_any_callable_and_the_cache_per_model_and_task(tmp_path):
    root = tmp_path / "data"
    vectors = write_toy_senteval_tree(root)
    tasks = {t: read_senteval_task(str(root), t) for t in ("MRPC", "Tense")}
    calls = []

    def encoder(sentences):
        calls.append(len(sentences))
        return np.stack([vectors[s] for s in sentences])

    cfg = sc.make_config("prototyping")
    cache = VectorCache(str(tmp_path / "cache"))
    first = evaluate_transfer({"toy": encoder}, tasks, cfg, cache=cache, fingerprints={"toy": "v1"},
                              progress=lambda m: None)["toy"]["callable"]
    assert len(calls) == 2
    for name, data in tasks.items():  # the same as scoring the task directly
        s = data.sentences()
        direct = score_task(data, np.stack([vectors[x] for x in s]), {x: k for k, x in enumerate(s)}, cfg)
        assert first["tasks"][name]["acc"] == direct["acc"]
    assert first["tasks"]["MRPC"]["score"] == (first["tasks"]["MRPC"]["acc"] + first["tasks"]["MRPC"]["f1"]) / 2
    assert first["table"] == table_of({t: first["tasks"][t]["score"] for t in tasks})
    again = evaluate_transfer({"toy": encoder}, tasks, sc.make_config("paper"), cache=cache,
                              fingerprints={"toy": "v1"}, progress=lambda m: None)["toy"]["callable"]
    assert len(calls) == 2 and all(t["cached"] for t in again["times"].values())
    evaluate_transfer({"toy": encoder}, tasks, cfg, cache=cache, fingerprints={"toy": "v2"}, progress=lambda m: None)
    assert len(calls) == 4  # another model (fingerprint): embedded again
