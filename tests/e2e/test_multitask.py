"""Seed 004's multi-task system (--task multitask, --criterion multitask, clear-eval-multitask):
heads, the schedules' plans, the average and fusion, PCGrad, the negative pairs' sign, evaluation."""

import itertools
import json
import math
import sys

import numpy as np
import pytest
import torch

from helpers import EXCLUSIVE, run_cli
from multitask_helpers import build, make_multitask_data, train_args

from fairseq_clear.data.multitask_dataset import CONTRASTIVE, SUPERVISED, chunks, epoch_rows, plan
from fairseq_clear.models.multitask_heads import HeadConfigError, ParaphraseHead, StsHead, build_heads
from fairseq_clear.pcgrad import project_conflicting


@pytest.fixture(scope="module")
def mt_data(tmp_path_factory):
    return make_multitask_data(tmp_path_factory.mktemp("multitask"))




# ---- heads -----------------------------------------------------------------------------

@pytest.mark.parametrize("sharing", ["none", "first-layer", "all"])
def test_head_shapes_and_sharing(sharing):
    heads = build_heads(16, 12, 5, 0.3, sharing)
    assert set(heads) == {"sentiment", "paraphrase", "sts"}
    x = torch.randn(6, 16)
    for h in heads.values():
        h.eval()
    assert heads["sentiment"](x).shape == (6, 5)
    assert heads["paraphrase"](x[:3], x[3:]).shape == (3,)
    assert heads["sts"](x[:3], x[3:]).shape == (3,)
    para, sts = heads["paraphrase"], heads["sts"]
    assert (para.dense is sts.dense) == (sharing in ("first-layer", "all"))
    assert (para.out_proj is sts.out_proj) == (sharing == "all")
    assert heads["sentiment"].dense is not para.dense
    assert para.dense.weight.shape == (12, 16) and para.out_proj.weight.shape == (12, 12)
    params = {id(p) for h in heads.values() for p in h.parameters()}
    # sentiment 2 layers; paraphrase 2 layers + bilinear; sts: 2, 1 or 0 layers of its own
    expected = 4 + 4 + 2 + {"none": 4, "first-layer": 2, "all": 0}[sharing]
    assert len(params) == expected


def test_head_options_are_checked():
    with pytest.raises(HeadConfigError, match="--head-sharing"):
        build_heads(16, 12, 2, 0.3, "half")
    with pytest.raises(HeadConfigError, match="--head-dropout"):
        build_heads(16, 12, 2, 1.5)


def test_bilinear_and_cosine_heads_against_hand_computed_values():
    heads = build_heads(2, 2, 2, 0.3, "first-layer", activation_fn="linear")
    para, sts = heads["paraphrase"], heads["sts"]
    with torch.no_grad():
        para.dense.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        para.dense.bias.zero_()
        para.out_proj.weight.copy_(torch.eye(2))
        para.out_proj.bias.copy_(torch.tensor([1.0, 0.0]))
        para.bilinear.weight.copy_(torch.tensor([[[1.0, 2.0], [3.0, 4.0]]]))
        para.bilinear.bias.fill_(0.5)
        sts.out_proj.weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
        sts.out_proj.bias.zero_()
    para.eval()
    sts.eval()
    a, b = torch.tensor([[1.0, 1.0]]), torch.tensor([[2.0, -1.0]])
    # paraphrase: t(a) = diag(1,2)a + (1,0) = (2, 2); t(b) = (3, -2); logit = t(a)^T W t(b) + 0.5
    ta, tb = np.array([2.0, 2.0]), np.array([3.0, -2.0])
    expected = ta @ np.array([[1.0, 2.0], [3.0, 4.0]]) @ tb + 0.5  # = (8, 12)·(3, -2) + 0.5 = 0.5
    assert para(a, b).item() == pytest.approx(expected)
    # sts shares dense (diag(1, 2)), its own out_proj swaps: t(a) = (2, 1), t(b) = (-2, 2)
    ua, ub = np.array([2.0, 1.0]), np.array([-2.0, 2.0])
    assert sts(a, b).item() == pytest.approx(ua @ ub / np.linalg.norm(ua) / np.linalg.norm(ub))
    assert isinstance(para, ParaphraseHead) and isinstance(sts, StsHead)


def test_heads_are_named_heads_of_the_model_and_survive_a_checkpoint(mt_data):
    task, model, _ = build(mt_data, "--head-hidden-dim", "24")
    assert set(model.classification_heads) == {"sentiment", "paraphrase", "sts"}
    state = model.state_dict()
    assert state["classification_heads.sentiment.out_proj.weight"].shape == (2, 24)
    assert torch.equal(state["classification_heads.paraphrase.dense.weight"], state["classification_heads.sts.dense.weight"])
    # fairseq's own upgrade code keeps them (same names and sizes), as on a resume
    _, model2, _ = build(mt_data, "--head-hidden-dim", "24")
    saved = {k: v.clone() for k, v in state.items()}
    model2.upgrade_state_dict_named(saved, "")
    model2.load_state_dict(saved, strict=True)
    for k, v in model2.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert model2.classification_heads["paraphrase"].dense is model2.classification_heads["sts"].dense


# ---- the schedules' plans -------------------------------------------------------------

def _plan(schedule, epoch=1, **kw):
    sizes = {"sentiment": 10, "paraphrase": 7, "sts": 5}
    rows = epoch_rows(sizes, epoch, seed=1, downsample=kw.pop("downsample", "smallest"))
    per_task = {n: chunks(r, 2) for n, r in rows.items()}
    return rows, plan(schedule, per_task, epoch, **kw)


def test_downsampling_to_the_smallest_task_redrawn_each_epoch():
    rows1, _ = _plan("average", 1)
    rows2, _ = _plan("average", 2)
    assert all(len(r) == 5 for r in rows1.values())  # STS's size
    assert len(set(rows1["sentiment"])) == 5 and set(rows1["sentiment"]) <= set(range(10))
    assert not np.array_equal(rows1["sentiment"], rows2["sentiment"])
    full, _ = _plan("average", 1, downsample="none")
    assert sorted(full["sentiment"]) == list(range(10))


def test_average_update_holds_one_batch_of_every_task():
    rows, updates = _plan("average")
    assert len(updates) == 3  # ceil(5 / 2)
    for k, update in enumerate(updates):
        assert [(p, n) for p, n, _ in update] == [(SUPERVISED, "sentiment"), (SUPERVISED, "paraphrase"), (SUPERVISED, "sts")]
        for _, n, r in update:
            assert list(r) == list(rows[n][2 * k:2 * k + 2])


def test_round_robin_by_batch_and_by_epoch_visit_the_tasks_in_order():
    _, by_batch = _plan("round-robin-batch")
    assert [u[0][1] for u in by_batch] == ["sentiment", "paraphrase", "sts"] * 3
    assert all(len(u) == 1 and u[0][0] == SUPERVISED for u in by_batch)
    _, by_epoch = _plan("round-robin-epoch")
    assert [u[0][1] for u in by_epoch] == ["sentiment"] * 3 + ["paraphrase"] * 3 + ["sts"] * 3


def test_fusion_trains_the_same_sts_batch_supervised_then_contrastive():
    rows, updates = _plan("fusion", fusion_task="sts")
    assert len(updates) == 6
    for k in range(3):
        supervised, contrastive = updates[2 * k], updates[2 * k + 1]
        assert {p for p, _, _ in supervised} == {SUPERVISED} and len(supervised) == 3
        assert [(p, n) for p, n, _ in contrastive] == [(CONTRASTIVE, "sts")]
        sts_rows = [r for _, n, r in supervised if n == "sts"][0]
        assert list(contrastive[0][2]) == list(sts_rows) == list(rows["sts"][2 * k:2 * k + 2])


def test_sequential_schedules_switch_after_the_first_phase():
    _, first = _plan("supervised-first", 1, first_phase_epochs=1)
    _, second = _plan("supervised-first", 2, first_phase_epochs=1)
    assert {p for u in first for p, _, _ in u} == {SUPERVISED}
    assert {p for u in second for p, _, _ in u} == {CONTRASTIVE}
    assert [u[0][1] for u in second] == ["sentiment"] * 3 + ["paraphrase"] * 3 + ["sts"] * 3
    _, c_first = _plan("contrastive-first", 1, first_phase_epochs=1)
    assert {p for u in c_first for p, _, _ in u} == {CONTRASTIVE}


def test_fusion_batches_carry_the_same_sentences(mt_data):
    task, _, _ = build(mt_data, "--schedule", "fusion")
    dataset = task.dataset("train")
    batches = dataset.batches(1, 8)
    first = dataset.collater([dataset[i] for i in batches[0]])
    second = dataset.collater([dataset[i] for i in batches[1]])
    assert set(first["multitask"]) == {"sentiment", "paraphrase", "sts"} and "contrastive" not in first
    assert "multitask" not in second
    sts = first["multitask"]["sts"]["src_tokens"]
    views = second["contrastive"]
    n = views["num_anchors"]
    assert n == sts.size(0) == 16  # 8 pairs: both sentences of each
    anchors, positives = views["src_tokens"][:n], views["src_tokens"][n:]
    assert torch.equal(anchors, positives)
    width = min(anchors.size(1), sts.size(1))
    assert torch.equal(anchors[:, :width], sts[:, :width])


# ---- losses -----------------------------------------------------------------------------

def test_average_loss_is_the_mean_of_the_single_task_losses(mt_data):
    task, model, criterion = build(mt_data)
    model.eval()  # no dropout: the same batch gives the same outputs
    dataset = task.dataset("train")
    sample = dataset.collater([dataset[i] for i in dataset.batches(1, 8)[0]])
    assert set(sample["multitask"]) == {"sentiment", "paraphrase", "sts"}
    with torch.no_grad():
        average, sample_size, logs = criterion(model, sample)
        singles = [criterion(model, {"multitask": {name: part}})[0] for name, part in sample["multitask"].items()]
    assert sample_size == 1
    assert average.item() == pytest.approx(float(np.mean([s.item() for s in singles])), rel=1e-6)
    # and each single-task loss is its textbook loss
    with torch.no_grad():
        part = sample["multitask"]["sts"]
        cos = model(part["src_tokens"], multitask_head="sts")[0]
        assert singles[2].item() == pytest.approx(torch.mean((cos - part["target"] / 5) ** 2).item(), rel=1e-6)
        part = sample["multitask"]["paraphrase"]
        logit = model(part["src_tokens"], multitask_head="paraphrase")[0]
        y = part["target"]
        bce = -(y * torch.log(torch.sigmoid(logit)) + (1 - y) * torch.log(1 - torch.sigmoid(logit))).mean()
        assert singles[1].item() == pytest.approx(bce.item(), rel=1e-5)


def test_negative_pairs_push_apart_what_positive_pairs_pull_together():
    from fairseq_clear import losses

    torch.manual_seed(0)
    base1, base2 = torch.randn(6, 8), torch.randn(6, 8)

    def cos_after_step(sign):
        z1, z2 = base1.clone().requires_grad_(True), base2.clone().requires_grad_(True)
        signs = torch.ones(6)
        signs[0] = sign
        loss, _ = losses.simcse(z1, z2, 0.05, signs=signs)
        loss.backward()
        with torch.no_grad():
            return torch.nn.functional.cosine_similarity(z1 - 0.01 * z1.grad, z2 - 0.01 * z2.grad)[0].item()

    before = torch.nn.functional.cosine_similarity(base1, base2)[0].item()
    assert cos_after_step(1.0) > before > cos_after_step(-1.0)
    # the -1 pair's term is exactly the +1 pair's, negated
    z1, z2 = base1.clone(), base2.clone()
    full_pos, _ = losses.simcse(z1, z2, 0.05, signs=torch.ones(6))
    flipped = torch.ones(6)
    flipped[0] = -1
    full_neg, _ = losses.simcse(z1, z2, 0.05, signs=flipped)
    terms = torch.nn.functional.cross_entropy(
        torch.nn.functional.normalize(z1, dim=-1) @ torch.nn.functional.normalize(z2, dim=-1).t() / 0.05,
        torch.arange(6), reduction="none")
    assert (full_pos - full_neg).item() == pytest.approx(2 * terms[0].item(), rel=1e-5)


def test_pcgrad_projects_conflicting_gradients():
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    # g1' = g1 - (g1·g2/|g2|²) g2 = (0.5, 0.5); g2' = g2 - (g2·g1/|g1|²) g1 = (0, 1); mean = (0.25, 0.75)
    assert torch.allclose(project_conflicting([g1, g2]), torch.tensor([0.25, 0.75]))
    assert torch.allclose(project_conflicting([g1, g2], reduction="sum"), torch.tensor([0.5, 1.5]))
    # no conflict: the plain mean
    h1, h2 = torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0])
    assert torch.allclose(project_conflicting([h1, h2]), (h1 + h2) / 2)
    # projected gradients no longer conflict with the other task's original gradient
    g1p = g1 - g1.dot(g2) / g2.dot(g2) * g2
    assert g1p.dot(g2).item() == pytest.approx(0.0)


def test_pcgrad_step_writes_the_reference_merge_into_the_gradients(mt_data):
    from test_faithful_pcgrad import reference_project, reference_reduce

    task, model, criterion = build(mt_data, "--pcgrad", "--head-dropout", "0")

    dataset = task.dataset("train")
    sample = dataset.collater([dataset[i] for i in dataset.batches(1, 8)[0]])
    model.eval()  # deterministic: the reference below sees the same outputs
    model.train = lambda mode=True: model  # keep eval mode through train_step
    model.zero_grad()
    task.train_step(sample, model, criterion, None, update_num=3)
    got = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                     for p in model.parameters() if p.requires_grad])
    parts, _ = criterion.task_losses(model, sample)
    params = [p for p in model.parameters() if p.requires_grad]
    flat, has = [], []
    for v in parts.values():
        grads = torch.autograd.grad(v, params, retain_graph=True, allow_unused=True)
        flat.append(torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)]))
        has.append(torch.cat([torch.full((p.numel(),), float(g is not None)) for g, p in zip(grads, params)]))
    # the keyed order (a resume projects as the uninterrupted run did)
    expected = project_conflicting(flat, torch.Generator().manual_seed(task.cfg.seed * 1_000_003 + 3),
                                   reached=[h.bool() for h in has])
    assert torch.allclose(got, expected, atol=1e-6)
    # WeiChengTseng/Pytorch-PCGrad's merge for one of its draws: the encoder averaged, the heads summed
    shared = torch.stack(has).prod(0).bool()
    assert shared.any() and not shared.all()
    # (its draws where each task meets its own gradient first, g_i·g_i > 0: tests/e2e/test_faithful_pcgrad.py
    # checks every draw on a small net)
    double = [g.double() for g in flat]
    projected = [[reference_project(double, i, (i, *rest)) for rest in itertools.permutations(set(range(3)) - {i})]
                 for i in range(3)]
    gap = min(float((got.double() - reference_reduce(list(pc), has)).abs().max())
              for pc in itertools.product(*projected))
    assert gap <= 1e-6 * float(torch.stack(flat).abs().max()), gap
    sentiment = torch.cat([torch.full((p.numel(),), n.startswith("classification_heads.sentiment."))
                           for n, p in model.named_parameters() if p.requires_grad])
    assert sentiment.any() and not shared[sentiment].any()
    assert not torch.allclose(got[sentiment], torch.stack(flat).mean(0)[sentiment], atol=1e-7)  # not a third
    if any(a.dot(b) < 0 for i, a in enumerate(flat) for b in flat[i + 1:]):  # surgery changed something
        assert not torch.allclose(got, torch.stack(flat).mean(0), atol=1e-6)


def test_bad_options_fail_with_one_line_naming_them(mt_data, tmp_path):
    from fairseq_clear.tasks.contrastive import TaskConfigError

    with pytest.raises(TaskConfigError, match="--pcgrad"):
        build(mt_data, "--pcgrad", "--schedule", "round-robin-batch")
    with pytest.raises(TaskConfigError, match="--first-phase-epochs"):
        build(mt_data, "--schedule", "supervised-first")
    with pytest.raises(TaskConfigError, match="--tasks"):
        build(mt_data, "--tasks", "sentiment,nli")
    proc = run_cli([sys.executable, "-m", "fairseq_clear.cli.eval_multitask", tmp_path / "none.pt", "--data", mt_data],
                   check=False)
    assert proc.returncode == 2 and proc.stdout.strip().splitlines()[-1].startswith("error: checkpoint")


# ---- real training, evaluation, resume --------------------------------------------------

def test_fairseq_train_fusion_then_evaluation_matches_sklearn_and_scipy(mt_data, tmp_path):
    from scipy.stats import pearsonr
    from sklearn.metrics import accuracy_score

    from harness.runs import logged

    save = tmp_path / "ck"
    out = run_cli(train_args(mt_data, save, "--schedule", "fusion", "--best-checkpoint-metric", "overall",
                             "--maximize-best-checkpoint-metric")).stdout
    records = logged(out)
    assert any("cl_loss" in r for r in records) and any("sts_loss" in r for r in records)
    valid = logged(out, "valid")
    assert valid and all("valid_overall" in r for r in valid)
    report = tmp_path / "eval.json"
    table = run_cli([sys.executable, "-m", "fairseq_clear.cli.eval_multitask", save / "checkpoint_best.pt",
                     save / "checkpoint_last.pt", "--data", mt_data, "--json", report]).stdout
    assert "Sentiment Cls. Acc." in table and "Ensemble (per-task)" in table
    result = json.loads(report.read_text())
    p = result["predictions"]
    sentiment = accuracy_score(p["sentiment"]["labels"], p["sentiment"]["pred"])
    paraphrase = accuracy_score(p["paraphrase"]["labels"], p["paraphrase"]["pred"])
    sts = pearsonr(p["sts"]["pred"], p["sts"]["labels"])[0]
    ens = result["ensemble"]
    assert ens["sentiment_acc"] == pytest.approx(sentiment)
    assert ens["paraphrase_acc"] == pytest.approx(paraphrase)
    assert ens["sts_pearson"] == pytest.approx(sts)
    assert ens["overall"] == pytest.approx((sentiment + paraphrase + sts) / 3)
    # the best checkpoint's dev overall as fairseq logged it equals the command's (same model, same data)
    best = max(valid, key=lambda r: float(r["valid_overall"]))
    row = [r for r in result["rows"] if r["model"].endswith("checkpoint_best.pt")][0]
    assert row["overall"] == pytest.approx(float(best["valid_overall"]), abs=2e-4)
    assert not math.isnan(row["sts_pearson"])


@EXCLUSIVE
def test_sigkill_mid_epoch_then_same_command_matches_uninterrupted_run(mt_data, tmp_path):
    """The project's resume guarantee with --task multitask (fusion: both objectives, two kinds of update)."""
    import signal

    from harness.runs import by_update, load_state, logged, max_abs_diff, optimizer_tensors, run_until, saved_at

    def command(save):
        return train_args(mt_data, save, "--schedule", "fusion", "--save-interval-updates", "5",
                          "--disable-validation", max_update=18, max_epoch=0, batch_size=8)

    full_out, rc, _ = run_until(command(tmp_path / "full"), lambda line: False)
    assert rc == 0, full_out[-3000:]
    killed_out, rc, killed = run_until(command(tmp_path / "killed"), saved_at(10), sig=signal.SIGKILL)
    assert killed and rc == -signal.SIGKILL, killed_out[-2000:]
    at_kill = load_state(tmp_path / "killed" / "checkpoint_last.pt")
    assert at_kill["extra_state"]["train_iterator"]["iterations_in_epoch"] > 0
    resumed_out, rc, _ = run_until(command(tmp_path / "killed"), lambda line: False)
    assert rc == 0 and "Loaded checkpoint" in resumed_out, resumed_out[-3000:]
    full, after = by_update(logged(full_out)), by_update(logged(resumed_out))
    assert sorted(full) == list(range(1, 19)) and after
    keys = ("loss", "sentiment_loss", "paraphrase_loss", "sts_loss", "cl_loss", "gnorm")
    mismatches = [(u, k) for u, r in after.items() for k in keys if r.get(k) != full[u].get(k)]
    assert not mismatches, mismatches[:10]
    a, b = load_state(tmp_path / "full" / "checkpoint_last.pt"), load_state(tmp_path / "killed" / "checkpoint_last.pt")
    assert max(max_abs_diff(a["model"], b["model"]).values()) == 0.0
    assert max(max_abs_diff(optimizer_tensors(a), optimizer_tensors(b)).values()) == 0.0


def test_pairs_task_negative_pairs_carry_their_sign(mt_data, tmp_path):
    """clear-prepare-pairs --negative-pairs keeps MRPC's label-0 pairs; contrastive_pairs --negative-pairs
    gives each row its sign and --criterion clear's loss is SimCSE's with those signs."""
    from harness.runs import build_task

    from fairseq_clear import losses

    root = mt_data.parent
    out = tmp_path / "pairs"
    run_cli([sys.executable, "-m", "fairseq_clear.cli.prepare_pairs", "--train", root / "glue" / "MRPC" / "train.tsv",
             "--format", "mrpc", "--data", root / "spm" / "bin", "--out", out, "--negative-pairs"])
    labels = [int(x) for x in (out / "label" / "train.label").read_text().split()]
    assert labels.count(0) == labels.count(1) == 48
    task, cfg = build_task(out, "--task", "contrastive_pairs", "--negative-pairs", "--batch-size", "8",
                           "--tokens-per-sample", "64", "--disable-validation")
    dataset = task.dataset("train")
    batch = dataset.collater([dataset[i] for i in range(8)])
    ids = batch["id"].tolist()
    assert batch["contrastive"]["pair_signs"].tolist() == [1.0 if labels[i] else -1.0 for i in ids]
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    model.eval()
    with torch.no_grad():
        loss, _, logs = criterion(model, batch)
        z = model(batch["contrastive"]["src_tokens"], contrastive=True)[0]
        n = batch["contrastive"]["num_anchors"]
        expected, _ = losses.simcse(z[:n], z[n:], criterion.cfg.temperature, signs=batch["contrastive"]["pair_signs"])
    assert logs["cl_loss"].item() == pytest.approx(expected.item(), rel=1e-5)
