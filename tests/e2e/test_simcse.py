"""SimCSE (Gao et al. 2021; seed 004 §4.1): dropout-only views, the supervised loss with hard
negatives, and both modes through the real fairseq-train CLI."""

import pytest
import torch
import torch.nn.functional as F

from harness.runs import logged
from helpers import USER_DIR, bin_path, run_cli, synthetic_sentences, train_args


def mean(values):
    values = [float(v) for v in values]
    return sum(values) / len(values)


def build(data, *extra, task="clear"):
    """Task, model and criterion exactly as fairseq-train builds them from these options."""
    import fairseq_clear  # noqa: F401
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(data), "--user-dir", USER_DIR, "--task", task, "--criterion", "clear",
        "--arch", "clear_roberta_tiny", "--tokens-per-sample", "64", "--cpu", *map(str, extra),
    ])
    cfg = convert_namespace_to_omegaconf(args)
    t = tasks.setup_task(cfg.task)
    return t, t.build_model(cfg.model), t.build_criterion(cfg.criterion)


# ---- unsupervised: identity views ---------------------------------------------------------

def test_identity_views_differ_only_by_dropout(tiny_data):
    task, model, _ = build(tiny_data, "--augmentations", "none", "--mlm", "off", "--loss-form", "simcse")
    task.load_dataset("train")
    dataset = task.dataset("train")
    batch = dataset.collater([dataset[i] for i in range(8)])
    assert "net_input" not in batch and "target" not in batch  # --mlm off: no MLM input
    src = batch["contrastive"]["src_tokens"]
    n = batch["contrastive"]["num_anchors"]
    assert n == 8 and torch.equal(src[:n], src[n:])  # both views are the sentence itself

    torch.manual_seed(0)
    model.train()
    z = model(src, contrastive=True)[0]
    assert not torch.allclose(z[:n], z[n:], atol=1e-4)  # two dropout masks, two vectors
    model.eval()
    with torch.no_grad():
        z = model(src, contrastive=True)[0]
    assert torch.allclose(z[:n], z[n:], atol=1e-5)

    # with every dropout at 0, training mode gives equal vectors too: dropout is the only noise
    _, quiet, _ = build(tiny_data, "--augmentations", "none", "--mlm", "off", "--dropout", "0",
                        "--attention-dropout", "0", "--activation-dropout", "0")
    quiet.train()
    z = quiet(src, contrastive=True)[0]
    assert torch.allclose(z[:n], z[n:], atol=1e-5)


def test_simcse_head_is_dense_tanh_and_used_in_training_only(tiny_data):
    _, model, _ = build(tiny_data, "--augmentations", "none", "--projection-layers", "1",
                        "--projection-output-activation-fn", "tanh")
    model.eval()
    tokens = torch.tensor([[0, 5, 6, 7, 2]])
    with torch.no_grad():
        pooled = model.sentence_representation(tokens)
        z = model(tokens, contrastive=True)[0]
    head = model.projection_head
    assert len(head.layers) == 1
    assert torch.allclose(z, torch.tanh(head.layers[0](pooled)), atol=1e-6)
    assert z.abs().max() < 1  # tanh output


# ---- supervised: the loss with hard negatives --------------------------------------------

def simcse_supervised_reference(z1, z2, z3, temperature, weight):
    """SimCSE's supervised loss written out from the paper / its cl_forward."""
    n = z1.size(0)
    sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / temperature
    if z3 is not None:
        sim3 = F.cosine_similarity(z1.unsqueeze(1), z3.unsqueeze(0), dim=-1) / temperature
        sim = torch.cat([sim, sim3], dim=1)
        # "weights are actually logits of weights": w on each anchor's own hard negative
        weights = torch.tensor([[0.0] * n + [0.0] * i + [weight] + [0.0] * (n - i - 1) for i in range(n)])
        sim = sim + weights
    return F.cross_entropy(sim, torch.arange(n))


class TableModel(torch.nn.Module):
    """Row i of the contrastive batch (token ``i`` in column 0) is embedded as ``table[i]``."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(table.clone())

    def forward(self, src_tokens, contrastive=False, **kwargs):
        return self.table[src_tokens[:, 0]], {}


class FakeTask:
    def __init__(self, hard):
        from fairseq.data import Dictionary

        self.target_dictionary = Dictionary()
        self.uses_hard_negatives = hard


def criterion_for(loss_form, hard, **kw):
    from fairseq_clear.criterions.clear import ClearCriterion, ClearCriterionConfig

    cfg = ClearCriterionConfig(loss_form=loss_form, world_size=1, tpu=False, **kw)
    return ClearCriterion(cfg, FakeTask(hard))


@pytest.mark.parametrize("weight", [0.0, 0.7, -1.5])
@pytest.mark.parametrize("hard", [True, False])
def test_criterion_equals_simcse_supervised_loss(weight, hard):
    from fairseq_clear import losses

    torch.manual_seed(int(10 * weight) + hard)
    n, d, tau = 16, 32, 0.05
    rows = 3 * n if hard else 2 * n
    table = torch.randn(rows, d)
    z1, z2 = table[:n], table[n : 2 * n]
    z3 = table[2 * n :] if hard else None
    expected = simcse_supervised_reference(z1, z2, z3, tau, weight)

    loss_sum, _ = losses.simcse(z1, z2, tau, None, z3, weight)
    assert torch.allclose(loss_sum / n, expected, atol=1e-5)

    criterion = criterion_for("simcse", hard, temperature=tau, hard_negative_weight=weight)
    model = TableModel(table)
    sample = {
        "contrastive": {
            "src_tokens": torch.arange(rows).unsqueeze(1),
            "num_anchors": n, "positives_per_anchor": 1, "hard_negatives": hard,
        },
        "ntokens": rows, "nsentences": n,
    }
    loss, sample_size, log = criterion(model, sample)
    assert torch.allclose(loss / sample_size, expected, atol=1e-5)
    # same gradients as the reference, for every row (hard negatives included)
    loss_grad = torch.autograd.grad(loss / sample_size, model.table)[0]
    ref_table = table.clone().requires_grad_(True)
    ref = simcse_supervised_reference(
        ref_table[:n], ref_table[n : 2 * n], ref_table[2 * n :] if hard else None, tau, weight
    )
    ref_grad = torch.autograd.grad(ref, ref_table)[0]
    assert torch.allclose(loss_grad, ref_grad, atol=1e-5)


def test_hard_negative_weight_changes_the_loss():
    torch.manual_seed(0)
    z1, z2, z3 = torch.randn(3, 8, 16).unbind(0)
    a = simcse_supervised_reference(z1, z2, z3, 0.05, 0.0)
    b = simcse_supervised_reference(z1, z2, z3, 0.05, 1.0)
    assert b > a  # a larger log-weight makes the hard negative count more


def test_hard_negatives_with_nt_xent_are_refused():
    with pytest.raises(ValueError, match="--loss-form simcse"):
        criterion_for("nt-xent", True)


# ---- the real CLI ------------------------------------------------------------------------

def test_fairseq_train_simcse_unsupervised(tiny_data, tmp_path):
    out = run_cli(train_args(
        tiny_data, tmp_path / "ckpt", "--augmentations", "none", "--mlm", "off",
        "--loss-form", "simcse", "--temperature", "0.05", "--projection-layers", "1",
        "--projection-output-activation-fn", "tanh", max_update=15, batch_size=32,
    )).stdout
    records = logged(out)
    assert len(records) == 15
    assert "mlm_loss" not in records[0] and "cl_loss" in records[0]
    assert mean(r["cl_loss"] for r in records[-4:]) < mean(r["cl_loss"] for r in records[:4])


@pytest.fixture(scope="module")
def triples(tiny_data, tmp_path_factory):
    """A SimCSE-format csv (sent0, sent1, hard_neg) binarized by clear-prepare-pairs."""
    work = tmp_path_factory.mktemp("simcse_sup")
    anchors = synthetic_sentences(160, seed=5)
    # the positive shares the anchor's words; the hard negative is another sentence
    positives = [a[:-1] + " again." for a in anchors]
    negatives = synthetic_sentences(160, seed=6)
    csv = work / "nli.csv"
    with open(csv, "w", encoding="utf-8") as f:
        f.write("sent0,sent1,hard_neg\n")
        for row in zip(anchors, positives, negatives):
            f.write(",".join(f'"{s}"' for s in row) + "\n")
    out = work / "pairs"
    run_cli([bin_path("clear-prepare-pairs"), "--train", csv, "--valid", csv,
             "--data", tiny_data, "--out", out])
    return out


def test_fairseq_train_simcse_supervised_with_hard_negatives(triples, tmp_path):
    save = tmp_path / "ckpt"
    args = train_args(triples, save, "--loss-form", "simcse", "--temperature", "0.05",
                      "--hard-negative-weight", "0.5", max_update=12, batch_size=16)
    args[args.index("--task") + 1] = "contrastive_pairs"
    out = run_cli(args).stdout
    assert "pairs: columns sent0, sent1, hard_neg (hard negatives: yes)" in out
    records = logged(out)
    assert len(records) == 12 and "mlm_loss" not in records[0]
    assert mean(r["cl_loss"] for r in records[-4:]) < mean(r["cl_loss"] for r in records[:4])

    # nt-xent has no place for hard negatives: refused at start-up, naming the options
    args[args.index("--loss-form") + 1] = "nt-xent"
    proc = run_cli(args, check=False)
    assert proc.returncode != 0 and "--loss-form simcse" in proc.stdout

    from fairseq_clear.models import ClearRobertaModel

    hub = ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(triples))
    assert hub.embed(["The cat sees the ball."]).shape == (1, 128)


def test_pairs_task_batch_layout_with_mlm_and_hard_negatives(triples):
    task, _, _ = build(triples, "--mlm", "--loss-form", "simcse", task="contrastive_pairs")
    task.load_dataset("train")
    dataset = task.dataset("train")
    ids = [0, 5, 9]
    batch = dataset.collater([dataset[i] for i in ids])
    views = batch["contrastive"]
    assert views["num_anchors"] == 3 and views["positives_per_anchor"] == 1 and views["hard_negatives"]
    src = views["src_tokens"]
    assert src.size(0) == 9
    pad = task.source_dictionary.pad()
    columns = dataset.dataset.defn["contrastive"]
    for j, i in enumerate(ids):
        for k, column in enumerate([columns.anchors[0], columns.positives[0], columns.hard_negatives[0]]):
            row = src[k * 3 + j]
            assert row[row.ne(pad)].tolist() == column[i].tolist()  # anchors, positives, hard negatives
    # --mlm: SimCSE's auxiliary MLM masks every sentence of a row
    assert batch["net_input"]["src_tokens"].size(0) == 9
    assert batch["target"].ne(pad).any()


def test_batches_are_regrouped_every_epoch(triples):
    # the batch is the set of negatives: fairseq alone would fix it for the whole run
    task, _, _ = build(triples, "--loss-form", "simcse", task="contrastive_pairs")
    task.load_dataset("train")
    dataset = task.dataset("train")
    assert not dataset.can_reuse_epoch_itr_across_epochs
    orders = []
    for epoch in (1, 2, 1):
        dataset.set_epoch(epoch)
        orders.append(dataset.ordered_indices().tolist())
    assert orders[0] != orders[1] and orders[0] == orders[2]  # new each epoch, reproducible
    assert sorted(orders[1]) == list(range(len(dataset)))
