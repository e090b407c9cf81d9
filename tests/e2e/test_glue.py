"""GLUE fine-tuning of a CLEAR checkpoint with fairseq's sentence_prediction task."""

import json
import math

import numpy as np
import pytest

from helpers import REPO, bin_path, run_captured, run_cli, shared, synthetic_sentences, write_glue

from fairseq_clear import continued
from fairseq_clear.evaluation.glue import finetune as glue

PREPARE = REPO / "examples" / "glue" / "prepare.sh"
FINETUNE = REPO / "examples" / "glue" / "finetune.sh"


def test_glue_metrics_match_scikit_learn():
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import f1_score, matthews_corrcoef

    rng = np.random.default_rng(0)
    labels, preds = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    mrpc = glue.glue_metrics("MRPC", preds, labels)
    acc = (preds == labels).mean() * 100
    f1 = f1_score(labels, preds) * 100
    assert mrpc["accuracy"] == pytest.approx(acc) and mrpc["f1"] == pytest.approx(f1)
    assert mrpc["score"] == pytest.approx((acc + f1) / 2)
    assert glue.glue_metrics("CoLA", preds, labels)["score"] == pytest.approx(matthews_corrcoef(labels, preds) * 100)
    assert glue.glue_metrics("RTE", preds, labels)["score"] == pytest.approx(acc)
    x, y = rng.normal(size=50), rng.normal(size=50)
    stsb = glue.glue_metrics("STS-B", x, y)
    assert stsb["score"] == pytest.approx((pearsonr(x, y)[0] + spearmanr(x, y)[0]) * 50)
    assert glue.glue_metrics("CoLA", [1, 1, 1], [1, 1, 1])["score"] == 0.0  # undefined -> 0


def test_readme_settings_and_cpu_variant(tmp_path, monkeypatch):
    rte = glue.settings("RTE")
    assert (rte["LR"], rte["MAX_SENTENCES"], rte["TOTAL_NUM_UPDATES"], rte["WARMUP_UPDATES"]) == ("2e-05", "16", "2036", "122")
    assert rte["BEST_METRIC"] == "accuracy" and rte["MAXIMIZE"] and rte["CRITERION_ARGS"] == ""
    stsb = glue.settings("STS-B")
    assert stsb["NUM_CLASSES"] == "1" and stsb["BEST_METRIC"] == "loss" and not stsb["MAXIMIZE"]
    assert stsb["CRITERION_ARGS"] == "--regression-target --report-pearson-and-spearman"
    assert glue.settings("MRPC")["CRITERION_ARGS"] == "--report-acc-and-f1"
    assert glue.settings("CoLA")["CRITERION_ARGS"] == "--report-mcc"
    monkeypatch.setattr(glue, "num_examples", lambda data_bin, split="train": 2490)
    cpu = glue.settings("RTE", "data", cpu=True)
    assert cpu["MAX_EPOCH"] == "3" and cpu["TOTAL_NUM_UPDATES"] == str(math.ceil(2490 / 16) * 3)
    assert cpu["WARMUP_UPDATES"] == str(round(0.06 * int(cpu["TOTAL_NUM_UPDATES"])))
    with pytest.raises(glue.GlueDataError, match="unknown GLUE task"):
        glue.settings("MNLI-X")


def test_split_reads_each_tasks_columns(ckpt, tmp_path):
    _, data = ckpt
    root = write_glue(tmp_path / "glue")
    spm = str(data / "sentencepiece.model")
    out = tmp_path / "out"
    assert glue.split_task(str(root), "MRPC", spm, str(out / "MRPC")) == {"train": 40, "dev": 40, "test": 40}
    assert (out / "MRPC" / "train.label").read_text().splitlines()[:3] == ["0", "1", "0"]
    first = (out / "MRPC" / "train.input0").read_text().splitlines()[0]
    assert "\ufeff" not in first and first.startswith("▁")
    assert glue.split_task(str(root), "CoLA", spm, str(out / "CoLA"))["train"] == 40  # no header to drop
    assert not (out / "CoLA" / "train.input1").exists()
    assert not (out / "CoLA" / "test.label").exists()
    glue.split_task(str(root), "STS-B", spm, str(out / "STS-B"))
    scores = [float(x) for x in (out / "STS-B" / "dev.label").read_text().split()]
    assert 0.0 <= min(scores) and max(scores) <= 1.0  # score / 5, as fairseq
    assert glue.split_task(str(root), "QQP", spm, str(out / "QQP"))["train"] == 40  # the broken line is dropped
    (root / "CoLA" / "dev.tsv").write_text("src\t1\n")
    with pytest.raises(glue.GlueDataError, match=r"dev.tsv:1: expected at least 4"):
        glue.split_task(str(root), "CoLA", spm, str(out / "CoLA2"))


def test_model_args_rebuild_the_checkpoints_encoder(ckpt):
    checkpoint, _ = ckpt
    flags = continued.model_args(str(checkpoint))
    pairs = dict(zip(flags[::2], flags[1::2]))
    assert pairs["--arch"] == "clear_roberta_tiny" and pairs["--max-positions"] == "64"
    assert pairs["--encoder-layers"] == "2" and pairs["--encoder-embed-dim"] == "128"


@pytest.mark.parametrize("field,value", [("activation_fn", "gelu --user-dir /tmp/evil"),
                                         ("encoder_layers", "2 --user-dir /tmp/evil"),
                                         ("_name", "clear_roberta_tiny --user-dir /tmp/evil"),
                                         ("encoder_embed_dim", True)])
def test_model_args_never_pass_a_checkpoint_string_through(ckpt, tmp_path, field, value):
    """The example scripts split these flags into fairseq-train's arguments: a value from the
    file must not become an option of its own (an injected --user-dir imports code)."""
    import torch

    from fairseq_clear.checkpoint_safety import safe_load

    checkpoint, _ = ckpt
    state = safe_load(str(checkpoint))
    model = state["cfg"]["model"]
    if isinstance(model, dict):
        model[field] = value
    else:  # fairseq stores the model's config as a Namespace
        setattr(model, field, value)
    bad = tmp_path / "bad.pt"
    torch.save(state, bad)
    with pytest.raises(continued.ModelArgsError, match=field if field != "_name" else "_name|arch"):
        continued.model_args(str(bad))


def finetune(task, checkpoint, data_bin, save, *extra, env=None):
    return run_cli(["bash", FINETUNE, task, checkpoint, "--max-update", "6", "--log-interval", "2", *extra],
                   env={"CPU": "1", "DATA_BIN": str(data_bin), "SAVE_DIR": str(save), **(env or {})})


def test_rte_prepare_and_finetune_end_to_end(ckpt, tmp_path):
    glue_dir = shared("glue", "glue_data")
    checkpoint, data = ckpt
    out = tmp_path / "glue-bin"
    run_cli(["bash", PREPARE, glue_dir, data, out, "RTE"])
    rte = out / "RTE-bin"
    for part in ("input0", "input1", "label"):
        assert (rte / part / "train.bin").is_file() and (rte / part / "valid.bin").is_file()
    assert (rte / "input0" / "dict.txt").read_text() == (data / "dict.txt").read_text()
    assert (rte / "sentencepiece.model").is_file()
    assert glue.num_examples(str(rte)) == 2490 and glue.num_examples(str(rte), "valid") == 277

    save = tmp_path / "ft"
    log = finetune("RTE", checkpoint, rte, save).stdout
    assert "not loading projection_head from the checkpoint" in log  # the classifier model has no g
    assert "Loaded checkpoint" in log
    assert "Overwriting classification_heads.sentence_classification_head.out_proj.weight" in log  # new head
    records = glue.read_valid_records(str(save / "train.log"))
    assert records and 0 <= float(records[-1]["valid_accuracy"]) <= 100
    assert (save / "checkpoint_best.pt").is_file()
    summary = json.loads((save / "dev_metrics.json").read_text())
    assert summary["metric"] == "accuracy" and "RTE dev accuracy (GLUE metric, best validation)" in log


def test_sts_b_regression_reports_pearson_and_spearman(ckpt, tmp_path):
    checkpoint, data = ckpt
    root = write_glue(tmp_path / "glue", rows_per_split=48)
    out = tmp_path / "glue-bin"
    run_cli(["bash", PREPARE, root, data, out, "STS-B"])
    assert (out / "STS-B-bin" / "label" / "valid.label").is_file()
    save = tmp_path / "ft"
    log = finetune("STS-B", checkpoint, out / "STS-B-bin", save, env={"MAX_EPOCH": "1"}).stdout
    record = glue.read_valid_records(str(save / "train.log"))[-1]
    assert "valid_pearson_and_spearman" in record and "valid_spearman" in record
    assert "STS-B dev pearson_and_spearman" in log


def test_finetune_refuses_missing_inputs(tmp_path):
    proc = run_cli(["bash", FINETUNE, "RTE", tmp_path / "none.pt"], check=False)
    assert proc.returncode != 0 and "none.pt' does not exist" in proc.stdout
    proc = run_cli(["bash", PREPARE, tmp_path, tmp_path, tmp_path / "o", "RTE"], check=False)
    assert proc.returncode != 0 and "no dict.txt" in proc.stdout


def test_glue_prepare_and_finetune_from_imported_bert(tmp_path):
    """GLUE with a pre-trained model's own tokenizer: prepare.sh encodes with the imported BERT's
    WordPiece and dict.txt, fine-tuning starts from its model.pt (sentence_prediction, STS-B)."""
    pytest.importorskip("transformers")
    from hf_standins import make_bert

    from fairseq_clear.export.from_hf import import_hf

    model = tmp_path / "bert-imported"
    import_hf(str(make_bert(tmp_path / "bert")), str(model))
    root = write_glue(tmp_path / "glue", rows_per_split=48)
    out = tmp_path / "glue-bin"
    run_cli(["bash", PREPARE, root, model, out, "STS-B"])
    task_dir = out / "STS-B-bin"
    assert json.loads((task_dir / "clear_tokenizer.json").read_text())["kind"] == "bert"
    assert (task_dir / "input0" / "dict.txt").read_text() == (model / "dict.txt").read_text()
    symbols = (out / "STS-B-bin" / "input0" / "dict.txt").read_text().split()[::2]
    assert any(s.startswith("##") for s in symbols)  # WordPiece, not sentencepiece
    save = tmp_path / "ft"
    log = finetune("STS-B", model / "model.pt", task_dir, save, env={"MAX_EPOCH": "1"}).stdout
    assert "Loaded checkpoint" in log and "STS-B dev pearson_and_spearman" in log


def write_mnli(root, rows=48, seed=3):
    """Tiny MNLI-format files: train (label in column 11), dev_matched/dev_mismatched (gold label
    in column 15 after label1..label5), test_matched/test_mismatched (no labels)."""
    s = synthetic_sentences(300, seed=seed)
    labels = ["entailment", "neutral", "contradiction"]
    (root / "MNLI").mkdir(parents=True)
    head = "index\tpromptID\tpairID\tgenre\ts1bp\ts2bp\ts1p\ts2p\tsentence1\tsentence2"
    train = [head + "\tlabel1\tgold_label"] + [
        f"{i}\t1\t1\tg\tx\tx\tx\tx\t{s[i]}\t{s[i + 1]}\t{labels[i % 3]}\t{labels[i % 3]}" for i in range(rows)]
    (root / "MNLI" / "train.tsv").write_text("\n".join(train) + "\n", encoding="utf-8")
    for k, split in enumerate(("dev_matched", "dev_mismatched")):
        dev = [head + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"] + [
            f"{i}\t1\t1\tg\tx\tx\tx\tx\t{s[100 + 50 * k + i]}\t{s[101 + 50 * k + i]}\t" + "\t".join([labels[i % 3]] * 6)
            for i in range(rows // 2)]
        (root / "MNLI" / f"{split}.tsv").write_text("\n".join(dev) + "\n", encoding="utf-8")
    return root


def test_mnli_reports_matched_mismatched_and_their_mean(ckpt, tmp_path):
    """Table 1 averages MNLI matched and mismatched: both dev splits are validated and summarized."""
    checkpoint, data = ckpt
    root = write_mnli(tmp_path / "glue")
    out = tmp_path / "glue-bin"
    run_cli(["bash", PREPARE, root, data, out, "MNLI"])
    mnli = out / "MNLI-bin"
    assert glue.num_examples(str(mnli), "valid") == 24 and glue.num_examples(str(mnli), "valid1") == 24
    assert glue.settings("MNLI", str(mnli))["VALID_SUBSETS"] == "valid,valid1"
    save = tmp_path / "ft"
    log = finetune("MNLI", checkpoint, mnli, save, env={"MAX_EPOCH": "1"}).stdout
    matched = glue.read_valid_records(str(save / "train.log"), "valid")
    mismatched = glue.read_valid_records(str(save / "train.log"), "valid1")
    assert matched and mismatched
    summary = json.loads((save / "dev_metrics.json").read_text())
    assert summary["dev_splits"] == ["dev_matched", "dev_mismatched"]
    best = summary["best"]
    m = float(next(r["valid_accuracy"] for r in matched if int(r["valid_num_updates"]) == best["num_updates"]))
    mm = float(next(r["valid1_accuracy"] for r in mismatched if int(r["valid1_num_updates"]) == best["num_updates"]))
    assert (best["dev_matched"], best["dev_mismatched"]) == (m, mm)
    assert best["accuracy"] == pytest.approx((m + mm) / 2)
    assert "MNLI dev accuracy (GLUE metric, best validation)" in log and "dev_mismatched" in log


def test_summarize_never_reports_a_nan_validation(tmp_path):
    """A diverged validation logs NaN (fairseq writes it as a bare NaN in its JSON line): it was
    taken as the best (max() keeps a NaN first), printed as 'nan' and written as invalid JSON."""
    log = tmp_path / "train.log"
    record = '2024-01-01 00:00:00 | INFO | valid | {{"epoch": {e}, "valid_pearson_and_spearman": {v}, "valid_num_updates": "{u}"}}\n'
    log.write_text(record.format(e=1, v="NaN", u=10) + record.format(e=2, v="71.5", u=20)
                   + record.format(e=3, v="Infinity", u=30))
    proc = run_captured([bin_path("clear-glue"), "summarize", log, "STS-B", "--json", tmp_path / "s.json"])
    assert proc.returncode == 0, proc.stderr
    assert "nan" not in proc.stdout.lower() and "inf" not in proc.stdout.lower(), proc.stdout
    assert "pearson_and_spearman (GLUE metric, best validation): 71.5 (epoch 2, update 20)" in proc.stdout
    summary = json.loads((tmp_path / "s.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert [r["pearson_and_spearman"] for r in summary["validations"]] == [None, 71.5, None]
    log.write_text(record.format(e=1, v="NaN", u=10))
    proc = run_captured([bin_path("clear-glue"), "summarize", log, "STS-B"])
    assert proc.returncode != 0 and proc.stderr.strip().startswith("error:") and str(log) in proc.stderr
    assert "Traceback" not in proc.stderr and "nan" not in proc.stdout.lower()
