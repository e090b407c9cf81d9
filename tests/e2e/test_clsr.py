"""CLSR (seed 003): a frozen pre-trained encoder, the MLP e and linear h trained with NT-Xent."""

import json

import pytest
import torch

from harness.runs import logged
from helpers import bin_path, run_cli, shared, synthetic_sentences, train_args

E_HIDDEN, E_OUT = 96, 64
CLSR_OPTIONS = [
    "--freeze-encoder", "--sentence-pooling", "mean",
    "--sentence-mlp-hidden-dim", str(E_HIDDEN), "--sentence-mlp-dim", str(E_OUT),
    "--projection-layers", "1", "--projection-dim", str(E_OUT),
    "--loss-form", "nt-xent", "--temperature", "0.1",
]


def mean(values):
    values = [float(v) for v in values]
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def clsr_run(tiny_data, tmp_path_factory):
    """A CLEAR checkpoint ([CLS], 2-layer g), then CLSR trained on top of it from the CLI."""
    work = tmp_path_factory.mktemp("clsr")
    run_cli(train_args(tiny_data, work / "clear", max_update=4))
    pretrained = work / "clear" / "checkpoint_last.pt"

    anchors = synthetic_sentences(200, seed=7)
    csv = work / "pairs.csv"
    with open(csv, "w", encoding="utf-8") as f:
        f.write("sent0,sent1\n")
        for a in anchors:
            f.write(f'"{a}","{a[:-1]} today."\n')
    data = work / "pairs"
    run_cli([bin_path("clear-prepare-pairs"), "--train", csv, "--valid", csv,
             "--data", tiny_data, "--out", data])

    args = train_args(data, work / "ckpt", *CLSR_OPTIONS, "--finetune-from-model", pretrained,
                      max_update=20, batch_size=64, validate=True)
    args[args.index("--task") + 1] = "contrastive_pairs"
    out = run_cli(args).stdout
    return {"pretrained": pretrained, "data": data, "save": work / "ckpt", "out": out}


def test_clsr_trains_e_and_h_from_any_checkpoint(clsr_run):
    out = clsr_run["out"]
    # CLEAR's 2-layer g does not fit CLSR's linear h: re-initialised, and said so
    assert "projection_head in the checkpoint has another shape" in out
    assert "sentence_mlp is not in the checkpoint" in out
    # only e (one hidden layer) and h (linear) train
    trained = (128 * E_HIDDEN + E_HIDDEN) + (E_HIDDEN * E_OUT + E_OUT) + (E_OUT * E_OUT + E_OUT)
    assert f"num. trained: {trained:,}" in out or f"num. trained: {trained}" in out
    records = logged(out)
    assert len(records) == 20 and "mlm_loss" not in records[0]
    assert mean(r["cl_loss"] for r in records[-4:]) < mean(r["cl_loss"] for r in records[:4])
    assert logged(out, "valid")


def test_encoder_weights_do_not_change(clsr_run):
    from fairseq_clear.checkpoint_safety import safe_load

    before = safe_load(clsr_run["pretrained"])["model"]
    after = safe_load(clsr_run["save"] / "checkpoint_last.pt")["model"]
    encoder = [k for k in before if k.startswith("encoder.")]
    assert len(encoder) > 20 and set(encoder) <= set(after)
    changed = [k for k in encoder if not torch.equal(before[k], after[k])]
    assert changed == []
    heads = [k for k in after if not k.startswith("encoder.")]
    assert sorted(heads) == sorted([
        "sentence_mlp.fc1.weight", "sentence_mlp.fc1.bias", "sentence_mlp.fc2.weight",
        "sentence_mlp.fc2.bias", "projection_head.layers.0.weight", "projection_head.layers.0.bias",
    ])


def test_hub_embed_applies_e_and_the_frozen_encoder_has_no_dropout(clsr_run):
    from fairseq_clear.models import ClearRobertaModel

    hub = ClearRobertaModel.from_pretrained(
        str(clsr_run["save"]), "checkpoint_last.pt", str(clsr_run["data"]))
    sentences = ["The cat sees the ball.", "A small child reads a story today."]
    vectors = hub.embed(sentences, convert_to="torch")
    assert vectors.shape == (2, E_OUT)  # e's output is the representation
    tokens = hub.tokenizer.encode(sentences, max_positions=hub.model.max_positions())[0].unsqueeze(0)
    model = hub.model
    with torch.no_grad():
        pooled = model.sentence_representation(tokens, apply_sentence_mlp=False)
        assert torch.allclose(vectors[0], model.sentence_mlp(pooled)[0], atol=1e-5)
        assert hub.embed(sentences[0], head="pooled").shape == (128,)
        model.train()  # a frozen encoder stays in eval mode: fixed embeddings
        again = model.sentence_representation(tokens, apply_sentence_mlp=False)
        assert not model.encoder.training and torch.equal(pooled, again)


def test_clsr_checkpoint_in_clear_eval_sts(clsr_run, tmp_path):
    sts = shared("sts")
    result = tmp_path / "sts.json"
    run_cli([
        bin_path("clear-eval-sts"), "--checkpoint", clsr_run["save"] / "checkpoint_last.pt",
        "--data", clsr_run["data"], "--sts-dir", sts, "--tasks", "STS-B", "--poolings", "mean",
        "--align-uniform-split", "none", "--output", result, "--cpu",
    ])
    report = json.loads(result.read_text())
    assert report["head"] == "representation"
    assert report["results"]["mean"]["tasks"]["STS-B"]["pairs"] == 1379


def test_clsr_recipe_refuses_a_count_that_is_not_a_number(clsr_run, tmp_path):
    """examples/clsr/train.sh does bash arithmetic on pairs.json's count: a string there
    (bash would run a command substitution in an array subscript) is refused first."""
    import shutil

    from helpers import REPO

    data = tmp_path / "pairs"
    shutil.copytree(clsr_run["data"], data)
    summary = json.loads((data / "pairs.json").read_text())
    marker = tmp_path / "ran"
    summary["splits"]["train"]["pairs_written"] = f"a[$(touch {marker})]"
    (data / "pairs.json").write_text(json.dumps(summary))
    proc = run_cli(["bash", REPO / "examples" / "clsr" / "train.sh", data, clsr_run["pretrained"],
                    "--max-update", "1"], env={"CPU": "1", "SAVE_DIR": str(tmp_path / "ckpt")}, check=False)
    assert proc.returncode != 0 and not marker.exists()
    assert "pairs_written" in proc.stdout and "not a positive integer" in proc.stdout, proc.stdout[-2000:]
