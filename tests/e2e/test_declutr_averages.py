"""clear-eval-senteval's averages are DeCLUTR's: Downstream over its 18 downstream tasks (SNLI and
image-caption retrieval included: DECLUTR's scripts/run_senteval.py, DOWNSTREAM_TASKS, and its paper's
"18 downstream tasks"), Probing over the 10 probing tasks, Avg their mean (its Table 1); an average
over fewer tasks says which are missing; the JSON names the SICK-R/STS-B score Spearman."""

import json
import shutil

import numpy as np
import pytest

from senteval_reference_data import write_toy_senteval_tree

from fairseq_clear.cli import eval_senteval
from fairseq_clear.evaluation.senteval import data as sd
from fairseq_clear.evaluation.senteval.transfer import coverage, table_of

#: each task's test score as DeCLUTR's _compute_aggregate_scores adds it (made up)
DECLUTR_18 = {"CR": 80.0, "MR": 75.0, "MPQA": 85.0, "SUBJ": 90.0, "SST2": 80.0, "SST5": 40.0, "TREC": 85.0,
              "MRPC": 70.0, "SNLI": 80.0, "SICK-E": 80.0, "SICK-R": 75.0, "STS-B": 70.0,
              "ImageCaptionRetrieval": 60.0, "STS12": 60.0, "STS13": 65.0, "STS14": 60.0, "STS15": 70.0,
              "STS16": 75.0}
PROBING_10 = {"SentLen": 90.0, "WC": 80.0, "TreeDepth": 40.0, "TopConst": 80.0, "BShift": 85.0, "Tense": 88.0,
              "SubjNum": 86.0, "ObjNum": 84.0, "SOMO": 60.0, "CoordInv": 70.0}


def test_downstream_is_the_mean_over_declutr_s_18_tasks():
    assert set(sd.DECLUTR_DOWNSTREAM) == set(DECLUTR_18) and len(sd.DECLUTR_DOWNSTREAM) == 18
    table = table_of({**DECLUTR_18, **PROBING_10})
    # by hand: 80+75+85+90+80+40+85+70+80+80+75+70+60+60+65+60+70+75 = 1300 over 18 tasks
    # (the old rule, without SNLI and ImageCaptionRetrieval: 1160 / 16 = 72.5)
    assert table["Downstream"] == pytest.approx(1300 / 18)
    # 90+80+40+80+85+88+86+84+60+70 = 763 over 10 tasks
    assert table["Probing"] == pytest.approx(76.3)
    assert table["Avg"] == pytest.approx((1300 / 18 + 76.3) / 2)  # Table 1: (78.17 + 73.67) / 2 = 75.92
    assert {k: table[k] for k in DECLUTR_18} == DECLUTR_18
    covered = coverage({**DECLUTR_18, **PROBING_10})
    assert covered["Downstream"]["complete"] and covered["Probing"]["complete"] and covered["Avg"]["complete"]
    assert covered["Downstream"]["missing"] == {} and len(covered["Downstream"]["tasks"]) == 18


def test_an_average_over_fewer_tasks_names_the_missing_ones():
    run = {t: s for t, s in DECLUTR_18.items() if t not in ("SNLI", "ImageCaptionRetrieval")}
    table = table_of({**run, "Tense": 88.0})
    assert table["Downstream"] == pytest.approx(1160 / 16)  # the mean of what ran, labelled below
    covered = coverage(list(run) + ["Tense"], reasons={"SNLI": "no data"})
    assert not covered["Downstream"]["complete"] and not covered["Avg"]["complete"]
    assert covered["Downstream"]["missing"] == {"SNLI": "no data", "ImageCaptionRetrieval": "not implemented"}
    assert len(covered["Downstream"]["tasks"]) == 16 and covered["Downstream"]["of"] == 18
    assert covered["Probing"]["tasks"] == ["Tense"] and len(covered["Probing"]["missing"]) == 9
    # the project cannot score image-caption retrieval: asking for it is one clear error
    with pytest.raises(sd.SentEvalDataError, match="ImageCaptionRetrieval.*not implemented"):
        sd.resolve_tasks("MR,ImageCaptionRetrieval")
    assert "SNLI" in sd.resolve_tasks("downstream") and "SNLI" in sd.resolve_tasks("all")


def test_the_command_averages_snli_labels_what_is_missing_and_names_spearman(tmp_path, monkeypatch, capsys):
    root = tmp_path / "data"
    vectors = write_toy_senteval_tree(root)
    for folder in ("MR", "SST", "TREC", "MRPC", "SICK"):  # keep SNLI and the probing file: a quick run
        shutil.rmtree(root / "downstream" / folder)

    def toy_encoders(args, hub):
        return {"toy": lambda sentences: np.stack([vectors[s] for s in sentences])}, {}, {}

    monkeypatch.setattr(eval_senteval, "build_encoders", toy_encoders)
    out = tmp_path / "senteval.json"
    eval_senteval.main(["--model", str(tmp_path), "--senteval-data", str(root), "--config", "prototyping",
                        "--no-cache", "--output", str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["tasks"] == ["SNLI", "Tense"]  # --tasks all: every task whose data is found
    row = report["models"]["toy"]["callable"]
    assert row["table"]["Downstream"] == row["tasks"]["SNLI"]["score"]  # SNLI is one of DeCLUTR's 18
    # the JSON names the score it holds: Spearman for SICK-R and STS-B, never Pearson
    assert "SICK-R and STS-B: test Spearman x100" in report["metric"] and "Pearson" not in report["metric"]
    down = report["averages"]["Downstream"]
    assert down["tasks"] == ["SNLI"] and down["of"] == 18 and not down["complete"]
    assert down["missing"]["ImageCaptionRetrieval"] == "not implemented" and down["missing"]["MR"] == "no data"
    assert len(down["missing"]) == 17 and not report["averages"]["Avg"]["complete"]
    assert "Downstream (1 of 18)" in printed and "Probing (1 of 10)" in printed
    assert "ImageCaptionRetrieval (not implemented)" in printed and "not DeCLUTR's Downstream; missing: " in printed

    # tasks named: those not named are missing as such
    eval_senteval.main(["--model", str(tmp_path), "--senteval-data", str(root), "--config", "prototyping",
                        "--no-cache", "--tasks", "Tense", "--output", str(out)])
    report = json.loads(out.read_text())
    assert report["averages"]["Probing"]["missing"]["SentLen"] == "not in --tasks"
    assert report["averages"]["Downstream"]["tasks"] == []
    assert not any(line.startswith("Downstream") for line in capsys.readouterr().out.splitlines())
