"""--task declutr: batch layout, the real fairseq-train CLI, continued pre-training, hub."""

import json

import pytest
import torch

from harness.runs import logged
from helpers import bin_path, make_binarized, run_cli, shared, synthetic_sentences, train_args

SPAN_OPTIONS = [
    "--min-span-length", "4", "--max-span-length", "16",  # documents of >= 2·2·16 = 64 tokens
    "--sentence-pooling", "mean", "--projection-layers", "0", "--temperature", "0.05",
]
SHORT_DOCS = 5


def documents(n_docs, seed, per_doc=14, short_every=0):
    """Documents of ``per_doc`` synthetic sentences separated by empty lines, plus 1-line ones."""
    sentences = synthetic_sentences(n_docs * per_doc, seed)
    lines = []
    for i in range(n_docs):
        if lines:
            lines.append("")
        lines += sentences[i * per_doc : (i + 1) * per_doc]
        if short_every and i % short_every == 0:
            lines += ["", "Hi there."]  # a document far shorter than 64 tokens
    return lines


@pytest.fixture(scope="module")
def doc_data(tmp_path_factory):
    work = tmp_path_factory.mktemp("declutr_data")
    train = documents(50, seed=0, short_every=10)  # 5 one-line documents
    assert train.count("Hi there.") == SHORT_DOCS
    return make_binarized(work, train, documents(8, seed=1))


def declutr_args(data, save, *extra, max_update=20, batch_size=8):
    args = train_args(data, save, *SPAN_OPTIONS, *extra, max_update=max_update, batch_size=batch_size)
    args[args.index("--task") + 1] = "declutr"
    return args


def mean(values):
    values = [float(v) for v in values]
    return sum(values) / len(values)


def build_task(data, **overrides):
    import fairseq_clear  # noqa: F401
    from fairseq_clear.tasks.declutr import DeclutrConfig, DeclutrTask

    options = dict(data=str(data), seed=1, tokens_per_sample=64, min_span_length=4, max_span_length=16)
    options.update(overrides)
    return DeclutrTask.setup_task(DeclutrConfig(**options))


def test_batch_layout_follows_the_sample_contract(doc_data):
    task = build_task(doc_data)
    task.load_dataset("train")
    dataset = task.dataset("train")
    spans = dataset.dataset.defn["contrastive"].positives[0].dataset  # the DocumentSpansDataset
    assert len(spans) == 50  # the 5 one-line documents are skipped
    ids = [3, 17, 29]
    batch = dataset.collater([dataset[i] for i in ids])
    views = batch["contrastive"]
    n, p = views["num_anchors"], views["positives_per_anchor"]
    assert (n, p) == (3 * 2, 2)
    assert views["src_tokens"].size(0) == n + n * p
    pad = task.source_dictionary.pad()

    def row(t):
        return t[t.ne(pad)].tolist()

    mlm_rows = batch["net_input"]["src_tokens"]
    assert mlm_rows.size(0) == n and batch["target"].size(0) == n
    mask_idx = task.mask_idx
    assert (mlm_rows == mask_idx).any()  # MLM on the anchors
    for j, doc in enumerate(ids):
        anchors, positives = spans.spans(doc)
        tokens = spans.dataset[doc]
        for a in range(2):
            k = j * 2 + a
            # the anchor's contrastive row is the masked anchor the MLM loss sees
            assert row(views["src_tokens"][k]) == row(mlm_rows[k])
            s, e = anchors[a]
            unmasked = torch.where(batch["target"][k].ne(pad), batch["target"][k], mlm_rows[k])
            assert row(unmasked)[1:-1] == tokens[s:e][:62].tolist()
            for q in range(2):
                ps, pe = positives[a, q]
                assert row(views["src_tokens"][n + k * p + q])[1:-1] == tokens[ps:pe][:62].tolist()


def test_clean_anchors_option(doc_data):
    task = build_task(doc_data, contrast_clean_anchors=True)
    task.load_dataset("train")
    dataset = task.dataset("train")
    batch = dataset.collater([dataset[i] for i in (0, 1)])
    assert not (batch["contrastive"]["src_tokens"][:4] == task.mask_idx).any()


def test_fairseq_train_declutr_logs_both_losses_and_counts_skipped_documents(doc_data, tmp_path):
    out = run_cli(declutr_args(doc_data, tmp_path / "ckpt", max_update=30)).stdout
    assert "50 documents" in out and f"skipped {SHORT_DOCS} documents shorter than 64 tokens" in out
    records = logged(out)
    assert len(records) == 30
    assert {"mlm_loss", "cl_loss", "cl_acc"} <= set(records[0])
    assert mean(r["cl_loss"] for r in records[-5:]) < mean(r["cl_loss"] for r in records[:5])
    assert (tmp_path / "ckpt" / "checkpoint_last.pt").is_file()


def test_continued_pretraining_from_a_clear_checkpoint(doc_data, tmp_path):
    # a CLEAR checkpoint: [CLS] pooling, a 2-layer projection head g
    clear = tmp_path / "clear"
    run_cli(train_args(doc_data, clear, max_update=4))
    ckpt = clear / "checkpoint_last.pt"

    out = run_cli(declutr_args(doc_data, tmp_path / "ft", "--finetune-from-model", ckpt, max_update=4)).stdout
    assert f"Loaded checkpoint {ckpt}" in out
    assert "not loading projection_head from the checkpoint" in out
    assert len(logged(out)) == 4

    out = run_cli(declutr_args(
        doc_data, tmp_path / "rs", "--restore-file", ckpt, "--reset-optimizer",
        "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler", max_update=3,
    )).stdout
    assert f"Loaded checkpoint {ckpt}" in out
    assert [r["num_updates"] for r in logged(out)] == ["1", "2", "3"]


def test_declutr_checkpoint_loads_in_the_hub_and_clear_eval_sts(doc_data, tmp_path):
    from fairseq_clear.models import ClearRobertaModel

    save = tmp_path / "ckpt"
    run_cli(declutr_args(doc_data, save, max_update=2))
    hub = ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(doc_data))
    assert hub.default_pooling == "mean"
    vectors = hub.embed(["The cat sees the ball.", "A dog likes an idea."])
    assert vectors.shape == (2, 128)

    sts = shared("sts")
    result = tmp_path / "sts.json"
    run_cli([
        bin_path("clear-eval-sts"), "--checkpoint", save / "checkpoint_last.pt", "--data", doc_data,
        "--sts-dir", sts, "--tasks", "STS-B", "--poolings", "mean",
        "--align-uniform-split", "none", "--output", result, "--cpu",
    ])
    scores = json.loads(result.read_text())["results"]["mean"]["tasks"]["STS-B"]
    assert scores["pairs"] == 1379 and -100 <= scores["spearman"] <= 100


def test_in_training_sts_validation_works_for_declutr(doc_data, tmp_path):
    dev = shared("sts", "STSBenchmark", "sts-dev.csv")
    args = declutr_args(doc_data, tmp_path / "ckpt", "--sts-validation", dev, max_update=2)
    args[args.index("--disable-validation")] = "--validate-interval-updates"
    args.insert(args.index("--validate-interval-updates") + 1, "2")
    out = run_cli(args).stdout
    valid = logged(out, "valid")
    assert valid and "valid_sts_b_spearman" in valid[-1]


def test_declutr_refuses_data_without_long_enough_documents(doc_data, tmp_path):
    proc = run_cli(declutr_args(doc_data, tmp_path / "x", "--max-span-length", "512"), check=False)
    assert proc.returncode != 0
    assert "no document of at least 2048 tokens" in proc.stdout and "--min-document-tokens" in proc.stdout


def declutr_reference(anchors, positives, temperature):
    """DeCLUTR eq. 2 written out: e_{i+AN} = mean of anchor i's P positives; both directions."""
    e = torch.cat([anchors, positives.mean(dim=1)])
    m = anchors.size(0)
    terms = []
    for i in range(2 * m):
        j = (i + m) % (2 * m)
        sims = torch.nn.functional.cosine_similarity(e[i : i + 1], e, dim=-1) / temperature
        others = torch.cat([sims[:i], sims[i + 1 :]])
        terms.append(-(sims[j] - torch.logsumexp(others, dim=0)))
    return torch.stack(terms).mean()


def test_criterion_compares_each_anchor_with_the_mean_of_its_positives():
    from fairseq.data import Dictionary

    from fairseq_clear.criterions.clear import ClearCriterion, ClearCriterionConfig

    class Task:
        target_dictionary = Dictionary()

    class Table(torch.nn.Module):
        def __init__(self, table):
            super().__init__()
            self.table = torch.nn.Parameter(table)

        def forward(self, src_tokens, contrastive=False, **kwargs):
            return self.table[src_tokens[:, 0]], {}

    torch.manual_seed(0)
    n, p, d = 8, 2, 16  # N·A = 8 anchors, P = 2
    table = torch.randn(n + n * p, d)
    criterion = ClearCriterion(
        ClearCriterionConfig(temperature=0.05, world_size=1, tpu=False), Task())
    sample = {
        "contrastive": {"src_tokens": torch.arange(n + n * p).unsqueeze(1), "num_anchors": n,
                        "positives_per_anchor": p},
        "ntokens": 0, "nsentences": n,
    }
    loss, sample_size, _ = criterion(Table(table), sample)
    expected = declutr_reference(table[:n], table[n:].view(n, p, d), 0.05)
    assert torch.allclose(loss / sample_size, expected, atol=1e-5)
    # a wrong layout (positive-major) gives another value: the test can fail
    wrong = declutr_reference(table[:n], table[n:].view(p, n, d).transpose(0, 1), 0.05)
    assert not torch.allclose(wrong, expected, atol=1e-3)
