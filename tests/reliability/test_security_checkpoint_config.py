"""A checkpoint that holds only plain data must not pick code to run either.

fairseq builds the model and task a checkpoint's config names, and some of its
architectures eval() config strings while they are built (fconv_lm's
decoder_layers, wav2vec2's conv_feature_layers) or torch.load a path from the
config (xm_transformer). Such files pass weights_only=True and the allow-list;
the config check refuses them, naming the field and value, before anything is
built, at every entry point a user has.
"""

import argparse
import copy
import shutil
from pathlib import Path

import pytest
import torch

import fairseq_clear  # noqa: F401  (patches fairseq's loader)
from fairseq import checkpoint_utils
from fairseq_clear.checkpoint_safety import UnsupportedCheckpointError, check_checkpoint_config, safe_load
from harness.runs import logged
from helpers import bin_path, run_cli, train_args


def _payload(marker):
    return f"__import__('os').system('touch {marker}')"


def _set(section, key, value):
    if isinstance(section, dict):
        section[key] = value
    else:  # fairseq keeps a model's legacy args as a Namespace inside cfg
        setattr(section, key, value)


def crafted(plain_checkpoint, out: Path, marker: Path, kind: str) -> Path:
    """The real checkpoint with its config edited as an attacker would, plain data only."""
    state = safe_load(plain_checkpoint)
    cfg = state["cfg"]
    if kind == "fconv_lm":
        cfg["model"] = {"_name": "fconv_lm", "decoder_layers": f"[({_payload(marker)}, 3)]",
                        "decoder_embed_dim": 8, "dropout": 0.0}
    elif kind == "wav2vec2":
        cfg["model"] = {"_name": "wav2vec2", "conv_feature_layers": f"[({_payload(marker)}, 3, 1)]"}
    elif kind == "xm_transformer":
        cfg["model"] = {"_name": "xm_transformer", "load_pretrained_decoder_from": str(marker)}
    elif kind == "arch":
        _set(cfg["model"], "arch", "fconv_lm")
    elif kind == "task":
        _set(cfg["task"], "_name", "speech_to_text")
    elif kind == "resolver":
        _set(cfg["task"], "data", "${oc.env:HOME}")
    elif kind == "legacy_args":
        state["cfg"] = None
        state["args"] = argparse.Namespace(arch="fconv_lm", task="language_modeling",
                                           decoder_layers=f"[({_payload(marker)}, 3)]")
    elif kind == "bpe":
        cfg["bpe"] = {"_name": "fastbpe", "bpe_codes": str(marker)}
    else:
        raise ValueError(kind)
    torch.save(state, out)
    return out


KINDS = {
    "fconv_lm": ("cfg.model._name", "fconv_lm"),
    "wav2vec2": ("cfg.model._name", "wav2vec2"),
    "xm_transformer": ("cfg.model._name", "xm_transformer"),
    "arch": ("cfg.model.arch", "fconv_lm"),
    "task": ("cfg.task._name", "speech_to_text"),
    "resolver": ("cfg.task.data", "${oc.env:HOME}"),
    "legacy_args": ("args.arch", "fconv_lm"),
    "bpe": ("cfg.bpe._name", "fastbpe"),
}


def test_without_the_check_the_config_really_runs_code(plain_checkpoint, tiny_data, tmp_path, monkeypatch, plugin_run):
    """The threat is real: with the check switched off, fairseq's builder runs the payload."""
    marker = tmp_path / "ran"
    evil = crafted(plain_checkpoint, tmp_path / "evil.pt", marker, "fconv_lm")
    from fairseq_clear import checkpoint_safety

    monkeypatch.setattr(checkpoint_safety, "check_checkpoint_config", lambda state, path: None)
    with pytest.raises(Exception):
        checkpoint_utils.load_model_ensemble_and_task([str(evil)], arg_overrides={"data": str(tiny_data)})
    assert marker.exists(), "the crafted config did not run: this test no longer shows the threat"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fairseq_loader_refuses_before_building(plain_checkpoint, tiny_data, tmp_path, kind, plugin_run):
    marker = tmp_path / "ran"
    evil = crafted(plain_checkpoint, tmp_path / "evil.pt", marker, kind)
    field, value = KINDS[kind]
    with pytest.raises(UnsupportedCheckpointError) as info:
        checkpoint_utils.load_model_ensemble_and_task([str(evil)], arg_overrides={"data": str(tiny_data)})
    assert field in str(info.value) and repr(value) in str(info.value), str(info.value)
    assert str(evil) in str(info.value)
    assert not marker.exists()


def test_hub_refuses(plain_checkpoint, tiny_data, tmp_path, monkeypatch):
    from fairseq_clear.models import ClearRobertaModel

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "ran"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    crafted(plain_checkpoint, model_dir / "model.pt", marker, "fconv_lm")
    with pytest.raises(UnsupportedCheckpointError, match="cfg.model._name is 'fconv_lm'"):
        ClearRobertaModel.from_pretrained(str(model_dir), "model.pt", str(tiny_data))
    assert not marker.exists()


@pytest.mark.parametrize("cli", ["clear-embed", "clear-export-hf", "clear-eval-sts"])
def test_clis_refuse_with_one_line(plain_checkpoint, tiny_data, tmp_path, cli):
    marker = tmp_path / "ran"
    evil = crafted(plain_checkpoint, tmp_path / "evil.pt", marker, "wav2vec2")
    (tmp_path / "in.txt").write_text("A dog reads a story.\n", encoding="utf-8")
    args = {
        "clear-embed": ["--checkpoint", evil, "--data", tiny_data, "--cpu",
                        "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"],
        "clear-export-hf": ["--checkpoint", evil, "--data", tiny_data, "--out", tmp_path / "hf"],
        "clear-eval-sts": ["--checkpoint", evil, "--data", tiny_data, "--cpu", "--sts-dir", tmp_path],
    }[cli]
    proc = run_cli([bin_path(cli), *args], env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, check=False)
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert "error: refusing checkpoint" in proc.stdout and "'wav2vec2'" in proc.stdout, proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout, proc.stdout[-3000:]
    assert not marker.exists()


@pytest.mark.parametrize("how", ["restore-file", "finetune-from-model", "resume"])
def test_fairseq_train_refuses(plain_checkpoint, tiny_data, tmp_path, how):
    marker = tmp_path / "ran"
    save = tmp_path / "save"
    save.mkdir()
    evil = crafted(plain_checkpoint, tmp_path / "evil.pt", marker, "fconv_lm")
    extra = []
    if how == "resume":
        shutil.copy(evil, save / "checkpoint_last.pt")
    else:
        extra = [f"--{how}", evil]
    proc = run_cli(train_args(tiny_data, save, *extra, max_update=3), check=False)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "cfg.model._name is 'fconv_lm'" in proc.stdout, proc.stdout[-2000:]
    assert not marker.exists()
    assert logged(proc.stdout) == [], "training ran"


def test_accepted_configs_pass(plain_checkpoint):
    state = safe_load(plain_checkpoint)
    check_checkpoint_config(state, "ok.pt")  # our own checkpoint, with fairseq's ${...} references
    stock = copy.deepcopy(state)
    _set(stock["cfg"]["model"], "_name", "roberta_base")
    _set(stock["cfg"]["model"], "arch", "roberta_base")
    _set(stock["cfg"]["task"], "_name", "masked_lm")
    check_checkpoint_config(stock, "roberta.pt")  # fairseq's roberta.base as shipped
    legacy = {"args": argparse.Namespace(arch="roberta_large", task="masked_lm", bpe="gpt2"), "model": {}}
    check_checkpoint_config(legacy, "legacy.pt")
    for bad in ({"cfg": {"model": {"_name": 3}, "task": {"_name": "clear"}}}, {"model": {}}, "text"):
        with pytest.raises(UnsupportedCheckpointError):
            check_checkpoint_config(bad, "bad.pt")


def test_checkpoint_path_with_colon_loads(plain_checkpoint, tiny_data, tmp_path):
    """fairseq splits paths on ':'; the CLIs and the hub take such a path as one file."""
    model_dir = tmp_path / "run:1"
    model_dir.mkdir()
    shutil.copy(plain_checkpoint, model_dir / "ckpt:best.pt")
    data = tmp_path / "data:v2"
    shutil.copytree(tiny_data, data)
    (tmp_path / "in.txt").write_text("A dog reads a story.\nThe cat sees the ball.\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    proc = run_cli([bin_path("clear-embed"), "--checkpoint", model_dir / "ckpt:best.pt", "--data", data,
                    "--cpu", "--input", tmp_path / "in.txt", "--output", out], check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    import numpy as np

    assert np.load(out).shape[0] == 2
