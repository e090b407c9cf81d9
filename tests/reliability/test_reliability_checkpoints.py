"""Safe checkpoint loading: a checkpoint whose pickle would run code is refused, by name,
everywhere the plugin loads one (a fairseq-clear run's loads through fairseq's loaders, the
hub, the CLIs), and the code does not run; real checkpoints load with weights_only=True; a
truncated checkpoint gives a clear error; copies are atomic.
"""

import ast
import os
import shutil
import subprocess
import sys

import pytest
import torch

import fairseq_clear  # noqa: F401
from fairseq import checkpoint_utils
from fairseq_clear.checkpoint_safety import (
    CorruptCheckpointError,
    UnsafeCheckpointError,
    safe_load,
)
from harness.runs import logged
from helpers import REPO, bin_path, run_cli, train_args
from hostile import evil_checkpoint


def test_crafted_payload_really_runs_code_without_weights_only(plain_checkpoint, tmp_path):
    """The control: unpickled the unsafe way, the crafted file does run its command."""
    marker = tmp_path / "ran"
    path = evil_checkpoint(plain_checkpoint, tmp_path / "evil.pt", marker)
    code = f"import torch; torch.load({str(path)!r}, weights_only=False)"
    subprocess.run([sys.executable, "-c", code], check=False, capture_output=True)
    assert marker.exists()


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy-format"])
@pytest.mark.parametrize("where", ["args", "model", "extra_state"])
@pytest.mark.parametrize("payload", ["os.system", "builtins.exec", "builtins.open"])
def test_checkpoint_utils_refuses_and_runs_nothing(plain_checkpoint, tmp_path, monkeypatch, payload,
                                                   where, legacy, plugin_run):
    # even with the environment asking torch for unsafe loading
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "ran"
    path = evil_checkpoint(plain_checkpoint, tmp_path / "evil.pt", marker, payload, where, legacy)
    loaders = {
        "load_checkpoint_to_cpu": lambda: checkpoint_utils.load_checkpoint_to_cpu(str(path)),
        "load_model_ensemble_and_task": lambda: checkpoint_utils.load_model_ensemble_and_task(
            [str(path)]
        ),
        "safe_load": lambda: safe_load(path),
    }
    for name, load in loaders.items():
        with pytest.raises(UnsafeCheckpointError) as info:
            load()
        message = str(info.value)
        assert str(path) in message and "refusing to load checkpoint" in message, (name, message)
        assert not marker.exists(), f"{name}: the payload ran"
    # the environment is left as it was
    assert os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in os.environ


@pytest.mark.parametrize("how", ["restore-file", "resume", "finetune-from-model"])
def test_fairseq_train_refuses_crafted_checkpoint(plain_checkpoint, tiny_data, tmp_path, how):
    marker = tmp_path / "ran"
    save = tmp_path / "save"
    save.mkdir()
    evil = evil_checkpoint(plain_checkpoint, tmp_path / "evil.pt", marker, "os.system", "args")
    extra = []
    if how == "resume":
        shutil.copy(evil, save / "checkpoint_last.pt")
        evil = save / "checkpoint_last.pt"
    elif how == "restore-file":
        extra = ["--restore-file", evil]
    else:
        extra = ["--finetune-from-model", evil]
    proc = run_cli(
        train_args(tiny_data, save, *extra, max_update=3),
        env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
        check=False,
    )
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "UnsafeCheckpointError" in proc.stdout, proc.stdout[-2000:]
    assert f"refusing to load checkpoint '{evil}'" in proc.stdout, proc.stdout[-2000:]
    assert not marker.exists()
    assert logged(proc.stdout) == [], "training ran"


def test_hub_refuses_crafted_checkpoint(plain_checkpoint, tiny_data, tmp_path, monkeypatch):
    from fairseq_clear.models import ClearRobertaModel

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "ran"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    evil_checkpoint(plain_checkpoint, model_dir / "model.pt", marker, "builtins.exec", "model")
    with pytest.raises(UnsafeCheckpointError) as info:
        ClearRobertaModel.from_pretrained(str(model_dir), "model.pt", str(tiny_data))
    assert str(model_dir / "model.pt") in str(info.value)
    assert not marker.exists()

    # the genuine checkpoint loads through the same path and embeds
    shutil.copy(plain_checkpoint, model_dir / "model.pt")
    hub = ClearRobertaModel.from_pretrained(str(model_dir), "model.pt", str(tiny_data))
    vectors = hub.embed(["The cat sees the ball.", "A dog reads a story."])
    assert vectors.shape[0] == 2 and torch.isfinite(torch.as_tensor(vectors)).all()


@pytest.mark.parametrize("cli", ["clear-embed", "clear-export-hf", "clear-eval-sts"])
def test_other_clis_refuse_crafted_checkpoint(plain_checkpoint, tiny_data, tmp_path, cli):
    marker = tmp_path / "ran"
    evil = evil_checkpoint(plain_checkpoint, tmp_path / "evil.pt", marker, "os.system", "args")
    (tmp_path / "in.txt").write_text("A dog reads a story.\n", encoding="utf-8")
    args = {
        "clear-embed": ["--checkpoint", evil, "--data", tiny_data, "--cpu",
                        "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"],
        "clear-export-hf": ["--checkpoint", evil, "--data", tiny_data, "--out", tmp_path / "hf"],
        "clear-eval-sts": ["--checkpoint", evil, "--data", tiny_data, "--cpu",
                           "--sts-dir", tmp_path],
    }[cli]
    proc = run_cli([bin_path(cli), *args], env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
                   check=False)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert f"refusing to load checkpoint '{evil}'" in proc.stdout, proc.stdout[-2000:]
    assert not marker.exists()


def test_real_checkpoint_loads_with_weights_only_forced(plain_checkpoint, monkeypatch, plugin_run):
    """fairseq's loader passes no weights_only; the plugin forces it on, whatever the environment."""
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    seen = []
    real_load = torch.load

    def spy(*args, **kwargs):
        seen.append((kwargs.get("weights_only"), os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD"),
                     os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    state = checkpoint_utils.load_checkpoint_to_cpu(str(plain_checkpoint))
    assert any(k.startswith("projection_head.") for k in state["model"])
    # fairseq's own load plus the config check's mmap peek (weights_only=True): never an
    # explicit False; forced on; the override removed
    assert len(seen) == 2 and seen[-1] == (None, "1", None) and seen[0] == (True, "1", None), seen
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(plain_checkpoint)])
    assert type(models[0]).__name__ == "ClearRobertaModel"
    assert all(entry[0] in (None, True) and entry[1:] == ("1", None) for entry in seen)


def _python_files():
    roots = ["fairseq_clear", "scripts", "examples", "benchmarks", "preprocess", "tests"]
    for root in roots:
        base = REPO / root
        if base.is_dir():
            yield from sorted(base.rglob("*.py"))


def test_plugin_never_loads_pickles_unsafely():
    """A grep with a parser: no weights_only=False, every torch.load passes weights_only=True,
    no pickle.load(s) / torch.serialization escape hatches, no unsafe environment switch."""
    problems = []
    for path in _python_files():
        rel = path.relative_to(REPO)
        text = path.read_text(encoding="utf-8")
        # tests set it to show that the plugin ignores it; their loads are checked below all the same
        if ("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" in text and rel.as_posix() != "fairseq_clear/checkpoint_safety.py"
                and rel.parts[0] != "tests"):
            problems.append(f"{rel}: mentions TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
        tree = ast.parse(text, filename=str(rel))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            kw = {k.arg: k.value for k in node.keywords}
            if "weights_only" in kw and not (
                isinstance(kw["weights_only"], ast.Constant) and kw["weights_only"].value is True
            ):
                problems.append(f"{rel}:{node.lineno}: {name}(weights_only={ast.unparse(kw['weights_only'])})")
            if name == "torch.load" and "weights_only" not in kw:
                problems.append(f"{rel}:{node.lineno}: torch.load without weights_only=True")
            if name in ("pickle.load", "pickle.loads", "dill.load", "cloudpickle.load",
                        "torch.serialization.load", "numpy.load", "np.load"):
                if name in ("numpy.load", "np.load"):
                    if "allow_pickle" in kw and not (
                        isinstance(kw["allow_pickle"], ast.Constant) and kw["allow_pickle"].value is False
                    ):
                        problems.append(f"{rel}:{node.lineno}: {name}(allow_pickle=...)")
                else:
                    problems.append(f"{rel}:{node.lineno}: {name}")
    assert not problems, "\n".join(problems)


def test_truncated_checkpoint_last_gives_a_clear_error(plain_checkpoint, tiny_data, tmp_path, plugin_run):
    save = tmp_path / "save"
    save.mkdir()
    data = plain_checkpoint.read_bytes()
    (save / "checkpoint_last.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptCheckpointError) as info:
        checkpoint_utils.load_checkpoint_to_cpu(str(save / "checkpoint_last.pt"))
    assert str(save / "checkpoint_last.pt") in str(info.value)
    proc = run_cli(train_args(tiny_data, save, max_update=3), check=False)
    assert proc.returncode != 0
    assert f"checkpoint '{save / 'checkpoint_last.pt'}' is truncated or corrupt" in proc.stdout
    assert logged(proc.stdout) == []


def test_copy_to_checkpoint_last_is_atomic(tmp_path, monkeypatch, plugin_run):
    """A copy interrupted half-way leaves the previous checkpoint_last.pt intact."""
    src, dst = tmp_path / "checkpoint_1_8.pt", tmp_path / "checkpoint_last.pt"
    src.write_bytes(b"new" * 1000)
    dst.write_bytes(b"old checkpoint")

    def dies_half_way(fsrc, fdst, *args, **kwargs):
        fdst.write(fsrc.read(100))
        raise KeyboardInterrupt("killed during the copy")

    monkeypatch.setattr(shutil, "copyfileobj", dies_half_way)
    monkeypatch.setattr(shutil, "_fastcopy_sendfile", dies_half_way, raising=False)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_utils.PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == b"old checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name, dst.name]
    monkeypatch.undo()
    assert checkpoint_utils.PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == src.read_bytes()
