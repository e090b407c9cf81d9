"""fairseq-hydra-train, fairseq's own way of pre-training RoBERTa, with the plugin's YAML recipes
(fairseq_clear/config/pretraining, ``clear-config-dir``): the same run as fairseq-train, the same
options, checkpoints the plugin loads (a stock RoBERTa from fairseq's base.yaml included), and
recipes a pip install has. The guarantees under hydra (lock, finished runs, hostile and damaged
checkpoints, kills) are tests/reliability/test_entry_points.py."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from harness.runs import load_state, logged
from helpers import CONFIG_DIR, REPO, USER_DIR, bin_path, hydra_args, recipe_options, run_cli

#: what differs between two runs of one command: speeds and times
TIMING = ("wps", "ups", "wall", "train_wall")


def _updates(output):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in logged(output)]


def _small(*overrides):
    """clear_tiny_cpu at test size: a few updates, a log line and a validation at each."""
    return ["optimization.max_update=6", "checkpoint.save_interval_updates=3", "common.log_interval=1", *overrides]


def test_a_recipe_under_hydra_is_the_same_run_as_under_fairseq_train(tiny_data, tmp_path):
    """clear_tiny_cpu.yaml through fairseq-hydra-train and its options through fairseq-train: the
    same per-update log and validations, the same weights, and the hub loads the hydra-written
    checkpoint (cfg.model has only _name) to the same vectors."""
    from fairseq_clear.models import ClearRobertaModel

    hydra = run_cli(hydra_args("clear_tiny_cpu", tiny_data, tmp_path / "h", *_small()), cwd=tmp_path)
    plain = run_cli([bin_path("fairseq-train"), tiny_data, "--user-dir", USER_DIR, *recipe_options("clear_tiny_cpu"),
                     "--save-dir", tmp_path / "f", "--max-update", "6", "--save-interval-updates", "3",
                     "--log-interval", "1"], cwd=tmp_path)
    assert len(_updates(hydra.stdout)) == 6 and _updates(hydra.stdout) == _updates(plain.stdout)
    assert [r["valid_loss"] for r in logged(hydra.stdout, "valid")] == [r["valid_loss"] for r in logged(plain.stdout, "valid")]
    assert "the plugin's fixes act in this run" in hydra.stdout  # the scope opened with the task
    a, b = load_state(tmp_path / "h" / "checkpoint_last.pt"), load_state(tmp_path / "f" / "checkpoint_last.pt")
    assert set(a["model"]) == set(b["model"]) and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["cfg"]["model"].get("arch") is None and a["cfg"]["model"]["_name"] == "clear_roberta_tiny"
    sentences = ["The cat sees the ball.", "A dog reads a story today."]
    vectors = [ClearRobertaModel.from_pretrained(str(tmp_path / d), "checkpoint_last.pt", str(tiny_data)).embed(sentences)
               for d in ("h", "f")]
    assert vectors[0].shape == (2, 128) and (vectors[0] == vectors[1]).all()
    export = run_cli([bin_path("clear-export-hf"), "--checkpoint", tmp_path / "h" / "checkpoint_last.pt", "--data",
                      tiny_data, "--out", tmp_path / "export", "--cpu"], cwd=tmp_path)
    assert "verified: the export matches the hub" in export.stdout


def test_accumulate_contrastive_under_hydra_acts_as_on_the_command_line(tiny_data, tmp_path):
    """+criterion.accumulate_contrastive=true makes the update's micro-batches one contrastive problem
    under hydra exactly as --accumulate-contrastive does under fairseq-train (it was ignored when the
    plugin's trainer hook did not act in hydra runs). An option the YAML does not set takes hydra's
    "+": fairseq registers the plugin's options only once it imports the --user-dir."""
    def cl_loss(output):
        return [r["cl_loss"] for r in logged(output)]

    common = ["optimization.max_update=2", "common.log_interval=1", "optimization.update_freq=[2]"]
    on = run_cli(hydra_args("clear_tiny_cpu", tiny_data, tmp_path / "on", *common,
                            "+criterion.accumulate_contrastive=true"), cwd=tmp_path).stdout
    off = run_cli(hydra_args("clear_tiny_cpu", tiny_data, tmp_path / "off", *common), cwd=tmp_path).stdout
    cli = run_cli([bin_path("fairseq-train"), tiny_data, "--user-dir", USER_DIR, *recipe_options("clear_tiny_cpu"),
                   "--save-dir", tmp_path / "cli", "--max-update", "2", "--log-interval", "1", "--update-freq", "2",
                   "--accumulate-contrastive"], cwd=tmp_path).stdout
    assert len(cl_loss(on)) == 2 and cl_loss(on) == cl_loss(cli)
    assert cl_loss(on)[0] != cl_loss(off)[0]


_TINY_ROBERTA = ["+model.encoder_layers=2", "+model.encoder_embed_dim=32", "+model.encoder_ffn_embed_dim=64",
                 "+model.encoder_attention_heads=2", "model.max_positions=64"]


def test_a_stock_roberta_from_fairseqs_base_yaml_is_continued_with_clear_and_loaded_by_the_hub(tiny_data, tmp_path):
    """fairseq's own examples/roberta/config/pretraining/base.yaml (scaled down, no plugin) writes a
    checkpoint whose cfg.model has only _name: roberta. The hub loads it, clear-export-hf exports it,
    the plugin continues it with --task clear (--finetune-from-model) and the hub loads that."""
    import fairseq

    from fairseq_clear.models import ClearRobertaModel

    base = Path(fairseq.__file__).parent / "examples" / "roberta" / "config" / "pretraining"
    stock = tmp_path / "stock"
    run_cli([bin_path("fairseq-hydra-train"), "--config-dir", base, "--config-name", "base", f"task.data={tiny_data}",
             f"checkpoint.save_dir={stock}", "common.fp16=false", "common.cpu=true", "common.log_format=json",
             "task.tokens_per_sample=64", "dataset.batch_size=8", "optimization.max_update=2",
             "optimization.update_freq=[1]", "lr_scheduler.warmup_updates=1", "+lr_scheduler.total_num_update=2",
             *_TINY_ROBERTA], cwd=tmp_path)
    state = load_state(stock / "checkpoint_last.pt")
    assert state["cfg"]["model"]["_name"] == "roberta" and "arch" not in state["cfg"]["model"]
    assert state["cfg"]["task"]["_name"] == "masked_lm"
    hub = ClearRobertaModel.from_pretrained(str(stock), "checkpoint_last.pt", str(tiny_data))
    assert hub.embed(["The cat sees the ball."]).shape == (1, 32)
    export = run_cli([bin_path("clear-export-hf"), "--checkpoint", stock / "checkpoint_last.pt", "--data", tiny_data,
                      "--out", tmp_path / "export", "--cpu"], cwd=tmp_path)
    assert "verified: the export matches the hub" in export.stdout
    continued = run_cli([bin_path("fairseq-train"), tiny_data, "--user-dir", USER_DIR, "--task", "clear",
                         "--criterion", "clear", "--arch", "clear_roberta", "--encoder-layers", "2",
                         "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
                         "--tokens-per-sample", "64", "--batch-size", "8", "--optimizer", "adam", "--lr", "1e-4",
                         "--max-update", "2", "--cpu", "--log-format", "json", "--log-interval", "1",
                         "--save-dir", tmp_path / "clear", "--finetune-from-model", stock / "checkpoint_last.pt",
                         "--no-epoch-checkpoints", "--disable-validation"], cwd=tmp_path)
    assert f"loading pretrained model from {stock / 'checkpoint_last.pt'}" in continued.stdout
    assert [int(r["num_updates"]) for r in logged(continued.stdout)] == [1, 2]
    after = load_state(tmp_path / "clear" / "checkpoint_last.pt")["model"]
    key = "encoder.sentence_encoder.layers.0.fc1.weight"
    assert after[key].shape == state["model"][key].shape and not torch.equal(after[key], state["model"][key])
    hub = ClearRobertaModel.from_pretrained(str(tmp_path / "clear"), "checkpoint_last.pt", str(tiny_data))
    assert hub.embed(["The cat sees the ball."]).shape == (1, 32)


def test_fairseqs_base_yaml_trains_clear_with_the_documented_overrides(tiny_data, tmp_path):
    """docs/training.md: base.yaml names task, criterion and model in its body; ++ replaces them and
    the run is the plugin's (its scope, CLEAR's two losses), scaled down to the CPU."""
    import fairseq

    base = Path(fairseq.__file__).parent / "examples" / "roberta" / "config" / "pretraining"
    docs = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    switch = ["++task._name=clear", "++criterion={_name:clear}", "++model._name=clear_roberta_base"]
    assert all(f" {o} " in docs.replace("'", "") or f" {o}\n" in docs.replace("'", "") for o in switch)
    proc = run_cli([bin_path("fairseq-hydra-train"), "--config-dir", base, "--config-name", "base",
                    f"common.user_dir={USER_DIR}", f"task.data={tiny_data}", *switch[:2], "++model._name=clear_roberta_tiny",
                    f"checkpoint.save_dir={tmp_path / 'ck'}", "common.fp16=false", "common.cpu=true",
                    "common.log_format=json", "common.log_interval=1", "task.tokens_per_sample=64", "dataset.batch_size=8",
                    "optimization.max_update=2", "optimization.update_freq=[1]", "lr_scheduler.warmup_updates=1",
                    "+lr_scheduler.total_num_update=2", "model.max_positions=64"], cwd=tmp_path)
    assert "the plugin's fixes act in this run (from its task ClearTask on)" in proc.stdout
    records = logged(proc.stdout)
    assert [int(r["num_updates"]) for r in records] == [1, 2] and all(float(r["cl_loss"]) > 0 for r in records)
    assert load_state(tmp_path / "ck" / "checkpoint_last.pt")["cfg"]["criterion"]["_name"] == "clear"


def test_clear_config_dir_names_the_recipes(tmp_path):
    out = run_cli([bin_path("clear-config-dir")], cwd=tmp_path).stdout.strip()
    assert Path(out) == CONFIG_DIR
    assert {p.name for p in (Path(out) / "pretraining").glob("*.yaml")} == {
        "clear_base.yaml", "clear_8gpu.yaml", "clear_large.yaml", "clear_tiny_cpu.yaml"}


def test_a_wheel_of_the_repository_holds_the_recipes(tmp_path):
    """The YAML recipes are package data: a wheel built from the repository has every one of them
    (and clear-config-dir among its console scripts)."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "fairseq_clear", src / "fairseq_clear", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    proc = subprocess.run([sys.executable, "setup.py", "-q", "bdist_wheel", "-d", str(tmp_path / "dist")], cwd=src,
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"fairseq_clear/config/pretraining/{p.name}" for p in (CONFIG_DIR / "pretraining").glob("*.yaml")}
    assert len(shipped) == 4 and shipped <= names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "clear-config-dir = fairseq_clear.cli.config_dir:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.parametrize("config", ["clear_base", "clear_8gpu", "clear_large", "clear_tiny_cpu"])
def test_every_recipe_composes_under_hydra_as_fairseq_reads_it(config):
    """Each YAML, composed by hydra as fairseq-hydra-train composes it (the FairseqConfig schema
    stored under its name), keeps every section it sets (a section missing from a recipe that
    inherits another would be the schema's None) and every value, as written."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from fairseq.dataclass.initialize import hydra_init

    hydra_init(config)
    # version 1.1's rules, as fairseq-hydra-train's hydra.main (without a version_base) composes
    with initialize_config_dir(config_dir=str(CONFIG_DIR / "pretraining"), version_base="1.1"):
        cfg = compose(config_name=config, overrides=[f"common.user_dir={USER_DIR}", "task.data=D"])
    written = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "pretraining" / f"{config}.yaml"))
    for section, values in written.items():
        if section == "hydra":
            continue
        for key, value in values.items():
            if value != "???":
                assert OmegaConf.to_container(cfg[section])[key] == value, (section, key)
