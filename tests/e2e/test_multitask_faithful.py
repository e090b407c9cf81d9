"""Seed 004 where it is explicit (issue 39, items 1, 2, 3 and 8): the recipe's "3 Given" contrastive
pre-training every epoch (§4.1), Table 1's configuration (sentiment supervised, the pair tasks by the
checkpoint's [CLS] cosine, §4.2-4.3), the §4.3 baseline's sentiment and Overall, and the NLI phase's
3 epochs (§5.3, Table 8)."""

import json
import math
import re
import sys

import numpy as np
import pytest

from helpers import REPO, run_cli
from hf_standins import make_bert
from multitask_helpers import build as build_multitask
from multitask_helpers import make_multitask_data, train_args, write_glue
from test_multitask_nli_schedule import write_nli

#: the module fixture is built once: every test of this file on one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("test_multitask_faithful")

RUN = str(REPO / "examples" / "multitask" / "run.sh")


def phases(stdout):
    return re.findall(r"^recipe: phase (\S+) from (\S+)$", stdout, flags=re.M)


def epoch_stats(log):
    """fairseq's end-of-epoch JSON records (``| train |``) of a phase's train.log."""
    from harness.runs import logged

    return logged(log.read_text(), "train")


@pytest.fixture(scope="module")
def recipe_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("faithful_recipe")
    return make_bert(root / "bert"), write_glue(root, sizes=(("train", 32), ("dev", 16))), write_nli(root / "nli.csv")


# ---- 1. the recipe's pre-training: the paraphrase pairs, then SimCSE-unsup on SST and STS, every epoch

def test_recipe_pretrains_on_the_three_given_datasets_every_epoch(recipe_inputs, tmp_path):
    bert, glue, _ = recipe_inputs
    out = tmp_path / "out"
    env = {"CPU": "1", "PARAPHRASE": "MRPC", "LIMIT": "32", "LIMIT_PAIRS": "32", "EPOCHS": "1",
           "PRETRAIN_EPOCHS": "2", "PYTHON": "python"}
    stdout = run_cli(["bash", RUN, bert, glue, out], env=env, timeout=1200).stdout
    seen = phases(stdout)
    assert [n for n, _ in seen] == ["pretrain-pairs-1", "pretrain-unsup-1", "pretrain-pairs-2", "pretrain-unsup-2",
                                    "finetune"], stdout[-3000:]
    assert seen[0][1] == str(out / "model" / "model.pt")
    for (prev, _), (_, start) in zip(seen, seen[1:]):  # each phase continues the previous one's weights
        assert start == str(out / prev / "checkpoint_last.pt")
    for epoch in (1, 2):
        pairs = (out / f"pretrain-pairs-{epoch}" / "train.log").read_text()
        # the paraphrase pairs, the non-paraphrases as negative pairs, one epoch per phase
        assert "'task': {'_name': 'contrastive_pairs'" in pairs and "'negative_pairs': True" in pairs
        unsup_log = out / f"pretrain-unsup-{epoch}" / "train.log"
        unsup = unsup_log.read_text()
        # SimCSE-unsup on the SST sentences, then on the STS sentences; no head trained
        assert "multitask: heads none; contrastive on sentiment, sts (schedule contrastive" in unsup
        (stats,) = epoch_stats(unsup_log)
        assert int(stats["train_num_updates"]) == 2 + 2  # 32 SST rows, then 32 STS pairs, 16 a batch
        assert "train_cl_loss" in stats and not any(k.endswith("sentiment_loss") for k in stats)
    # one projection head through every phase (§4.1's MLP): only the first phase starts it afresh
    fresh = [n for n, _ in seen[:-1] if "projection_head is not in the checkpoint" in (out / n / "train.log").read_text()]
    assert fresh == ["pretrain-pairs-1"]
    # each epoch draws its own order: the phases of epoch 2 do not repeat epoch 1's seed
    seeds = {re.search(r"'seed': (\d+)", (out / f"pretrain-unsup-{e}" / "train.log").read_text()).group(1)
             for e in (1, 2)}
    assert len(seeds) == 2
    assert (out / "eval.json").is_file()


def test_recipe_refuses_an_unknown_pretrain_data_before_any_work(recipe_inputs, tmp_path):
    bert, glue, _ = recipe_inputs
    proc = run_cli(["bash", RUN, bert, glue, tmp_path / "o"], env={"CPU": "1", "PARAPHRASE": "MRPC",
                   "PRETRAIN_DATA": "nli"}, check=False)
    assert proc.returncode == 1
    assert proc.stdout.strip() == "error: PRETRAIN_DATA must be 3given or quora, got 'nli'"
    assert not (tmp_path / "o").exists()


# ---- 8. the NLI phase's own epochs, the seed's 3 by default (§5.3, Table 8)

def test_nli_phase_runs_the_seeds_three_epochs_by_default(recipe_inputs, tmp_path):
    bert, glue, nli = recipe_inputs
    out = tmp_path / "out"
    # the GPU form's defaults (PRETRAIN_EPOCHS 5), without the 3 datasets' phase
    env = {"CPU": "0", "PARAPHRASE": "MRPC", "NLI": str(nli), "PRETRAIN": "0", "EPOCHS": "1", "PYTHON": "python"}
    stdout = run_cli(["bash", RUN, bert, glue, out], env=env, timeout=1200).stdout
    assert [n for n, _ in phases(stdout)] == ["pretrain-nli", "finetune"], stdout[-3000:]
    epochs = [int(r["epoch"]) for r in epoch_stats(out / "pretrain-nli" / "train.log")]
    assert epochs == [1, 2, 3]


# ---- 2. Table 1's configuration on the training side: only sentiment supervised

@pytest.fixture(scope="module")
def mt_data(tmp_path_factory):
    return make_multitask_data(tmp_path_factory.mktemp("faithful_mt"))


def build(data, *extra):
    return build_multitask(data, *extra, criterion=False)


def parts(updates):
    return [[(phase, name) for phase, name, _ in update] for update in updates]


def test_table1_schedules_supervise_sentiment_and_contrast_the_three_datasets(mt_data):
    from fairseq_clear.data.multitask_dataset import CONTRASTIVE, SUPERVISED

    three = ("--tasks", "sentiment", "--contrastive-tasks", "sentiment,paraphrase,sts")
    task, model = build(mt_data, *three, "--schedule", "contrastive-first", "--first-phase-epochs", "1")
    assert set(model.classification_heads) == {"sentiment"}
    dataset = task.dataset("train")
    first, second = dataset.updates(1, 8), dataset.updates(2, 8)
    n = len(dataset.updates(2, 8))  # 96 rows of each, down-sampled to the smallest: n batches a task
    # §5.3: "first SST data, then Quora data, and finally SemEval STS data"
    assert parts(first) == [[(CONTRASTIVE, "sentiment")]] * n + [[(CONTRASTIVE, "paraphrase")]] * n + \
        [[(CONTRASTIVE, "sts")]] * n
    assert parts(second) == [[(SUPERVISED, "sentiment")]] * n
    task.load_dataset("valid")  # validation: the supervised task only (no pair head to score)
    assert parts(task.dataset("valid").updates(1, 8)) == [[(SUPERVISED, "sentiment")]] * 4

    task, model = build(mt_data, *three, "--schedule", "fusion", "--fusion-task", "sentiment")
    assert set(model.classification_heads) == {"sentiment"}
    updates = task.dataset("train").updates(1, 8)
    assert parts(updates) == [[(SUPERVISED, "sentiment")], [(CONTRASTIVE, "sentiment")]] * n + \
        [[(CONTRASTIVE, "paraphrase")]] * n + [[(CONTRASTIVE, "sts")]] * n
    assert all(list(updates[2 * k][0][2]) == list(updates[2 * k + 1][0][2]) for k in range(n))  # the same batch


def test_contrastive_schedule_builds_no_head_and_runs_the_datasets_in_turn(mt_data):
    from fairseq_clear.data.multitask_dataset import CONTRASTIVE

    task, model = build(mt_data, "--schedule", "contrastive", "--tasks", "sentiment,sts", "--downsample", "none")
    assert len(model.classification_heads) == 0 and model.projection_head is not None
    assert parts(task.dataset("train").updates(1, 8)) == [[(CONTRASTIVE, "sentiment")]] * 12 + \
        [[(CONTRASTIVE, "sts")]] * 12
    from fairseq_clear.tasks.contrastive import TaskConfigError

    with pytest.raises(TaskConfigError, match="--disable-validation"):
        task.load_dataset("valid")
    with pytest.raises(TaskConfigError, match="--contrastive-tasks"):
        build(mt_data, "--schedule", "average", "--contrastive-tasks", "sts")


# ---- 2 and 3. clear-eval-multitask: sentiment from the head, the pair tasks from the [CLS] cosine

@pytest.fixture(scope="module")
def sentiment_checkpoint(mt_data, tmp_path_factory):
    """A checkpoint with a sentiment head only (the seed's "minBERT trained on the SST dataset")."""
    save = tmp_path_factory.mktemp("sst_only")
    run_cli(train_args(mt_data, save, "--tasks", "sentiment", max_epoch=1))
    return save / "checkpoint_last.pt"


def brute_force_threshold_accuracy(cos, labels):
    """The best accuracy of ``cos > t`` over every t that splits these rows differently."""
    cuts = np.concatenate([[-2.0], np.sort(cos)])
    return max(float(((cos > t).astype(int) == labels).mean()) for t in cuts)


@pytest.mark.parametrize("mode", [["--pair-tasks", "cosine"], ["--baseline", "cosine"]])
def test_cosine_pair_tasks_score_sentiment_by_the_head_and_overall_over_three(mt_data, sentiment_checkpoint,
                                                                             tmp_path, mode):
    from scipy.stats import pearsonr

    from fairseq_clear.evaluation.multitask.scoring import cls_cosines, evaluate, load

    report = tmp_path / "row.json"
    table = run_cli([sys.executable, "-m", "fairseq_clear.cli.eval_multitask", sentiment_checkpoint, "--data", mt_data,
                     *mode, "--json", report]).stdout
    row = json.loads(report.read_text())["rows"][0]
    heads = evaluate([str(sentiment_checkpoint)], str(mt_data))["rows"][0]
    assert row["sentiment_acc"] == pytest.approx(heads["sentiment_acc"])  # the SST model's classifier
    hub = load(str(sentiment_checkpoint), str(mt_data))
    cos, scores = cls_cosines(hub, str(mt_data), "sts", "valid")[:2]
    assert row["sts_pearson"] == pytest.approx(pearsonr(cos, scores)[0], abs=1e-6)
    # the threshold is chosen on the train split, not on the scored dev split
    assert row["threshold_split"] == "train"
    train_cos, train_labels = cls_cosines(hub, str(mt_data), "paraphrase", "train")[:2]
    chosen = float(((train_cos > row["threshold"]).astype(int) == train_labels).mean())
    assert chosen == pytest.approx(brute_force_threshold_accuracy(train_cos, train_labels.astype(int)))
    dev_cos, dev_labels = cls_cosines(hub, str(mt_data), "paraphrase", "valid")[:2]
    paraphrase = float(((dev_cos > row["threshold"]).astype(int) == dev_labels).mean())
    assert row["paraphrase_acc"] == pytest.approx(paraphrase)
    assert row["overall"] == pytest.approx((row["sentiment_acc"] + paraphrase + row["sts_pearson"]) / 3)
    assert "n/a" not in table and "paraphrase and STS only" not in table


def test_cosine_rows_without_a_sentiment_head_have_no_overall(mt_data, tmp_path):
    """No sentiment head: sentiment n/a and Overall n/a, never a mean of the two other metrics."""
    from fairseq_clear.evaluation.multitask.scoring import evaluate_cosine, format_table

    save = tmp_path / "para"
    run_cli(train_args(mt_data, save, "--tasks", "paraphrase", max_epoch=1))
    result = evaluate_cosine([str(save / "checkpoint_last.pt")], str(mt_data))
    row = result["rows"][0]
    assert row["sentiment_acc"] is None and row["overall"] is None
    assert not math.isnan(row["paraphrase_acc"]) and row["threshold_split"] == "train"
    assert "n/a" in format_table(result)
