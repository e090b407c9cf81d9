"""A small checkpoint cannot make us allocate more than its own weights, and NaN weights are refused.

fairseq builds a model from the checkpoint's config before loading its weights: a config
with ``max_positions = 10**9`` made the hub and clear-embed try to allocate 512 GB. Every
entry point (the hub, clear-embed, clear-glue model-args, fairseq-train of our task) is run
here in a process whose address space is capped, so that an unchecked size fails the test
with a MemoryError or a kill instead of taking the machine.
"""

import sys
import textwrap

import pytest
import torch

import fairseq_clear  # noqa: F401
from fairseq_clear.checkpoint_safety import NonFiniteWeightsError, safe_load
from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_sizes
from helpers import bin_path, run_captured, train_args

#: the cap of every process here: a tiny model needs far less, a bomb far more
MEMORY_CAP = 3 * 2**30


def _run(args, **kwargs):
    return run_captured(args, memory_cap=MEMORY_CAP, **kwargs)


def _edited(plain_checkpoint, out, **model_fields):
    state = safe_load(plain_checkpoint)
    for key, value in model_fields.items():  # fairseq-train keeps the model's args as a Namespace
        setattr(state["cfg"]["model"], key, value)
    torch.save(state, out)
    return out


BOMBS = {
    "max_positions": dict(max_positions=10**9),
    "encoder_layers": dict(encoder_layers=100000),
    "encoder_ffn_embed_dim": dict(encoder_ffn_embed_dim=10**8),
    "encoder_embed_dim": dict(encoder_embed_dim=10**6),
    "projection_dim": dict(projection_dim=10**9),
    "not_an_int": dict(encoder_layers="2"),
    "bool": dict(encoder_layers=True),
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_hub_refuses_sizes_its_weights_do_not_have(plain_checkpoint, tiny_data, tmp_path, bomb):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    _edited(plain_checkpoint, model_dir / "model.pt", **BOMBS[bomb])
    code = textwrap.dedent(f"""
        from fairseq_clear.models import ClearRobertaModel
        ClearRobertaModel.from_pretrained({str(model_dir)!r}, "model.pt", {str(tiny_data)!r})
    """)
    proc = _run([sys.executable, "-c", code])
    field = next(iter(BOMBS[bomb]))
    assert proc.returncode != 0
    assert "CheckpointSizeError" in proc.stderr and field in proc.stderr, proc.stderr[-2000:]
    assert "MemoryError" not in proc.stderr and str(model_dir / "model.pt") in proc.stderr


def test_clear_embed_refuses_with_one_line(plain_checkpoint, tiny_data, tmp_path):
    evil = _edited(plain_checkpoint, tmp_path / "evil.pt", max_positions=10**9)
    (tmp_path / "in.txt").write_text("a sentence\n")
    proc = _run([bin_path("clear-embed"), "--checkpoint", evil, "--data", tiny_data, "--cpu",
                 "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"])
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: refusing checkpoint") and "max_positions is 1000000000" in lines[-1]
    assert "Traceback" not in proc.stderr


def test_glue_model_args_refuses_what_the_recipes_would_build(plain_checkpoint, tmp_path):
    evil = _edited(plain_checkpoint, tmp_path / "evil.pt", max_positions=10**12)
    proc = _run([bin_path("clear-glue"), "model-args", evil])
    assert proc.returncode != 0 and proc.stdout == ""
    assert "max_positions" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_fairseq_train_refuses_to_restore_a_bomb(plain_checkpoint, tiny_data, tmp_path):
    evil = _edited(plain_checkpoint, tmp_path / "evil.pt", encoder_layers=200)  # under the ceiling: the weights say 2
    proc = _run(train_args(tiny_data, tmp_path / "save", "--restore-file", evil, max_update=3))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "CheckpointSizeError" in out and "encoder_layers is 200 but its weights have 2" in out, out[-2000:]


def test_a_config_much_larger_than_its_weights_is_refused(plain_checkpoint, tmp_path):
    """Without the weights to compare, the model the config describes must fit the file's parameters."""
    state = safe_load(plain_checkpoint)
    state["model"] = {k: v for k, v in state["model"].items() if "layers." not in k and "embed_positions" not in k}
    for key, value in dict(encoder_layers=96, encoder_embed_dim=128, encoder_ffn_embed_dim=65536).items():
        setattr(state["cfg"]["model"], key, value)
    with pytest.raises(CheckpointSizeError, match="describes a model of"):
        check_sizes(state, "x.pt")
    check_sizes(safe_load(plain_checkpoint), "x.pt")  # the real one passes


def test_sizes_are_checked_without_reading_the_tensors(plain_checkpoint, monkeypatch):
    """The check reads shapes from the mmap'ed file: no tensor data is copied."""
    state = torch.load(plain_checkpoint, map_location="cpu", weights_only=True, mmap=True)
    for name, tensor in state["model"].items():
        assert tensor.untyped_storage().nbytes() > 0  # mapped, not materialised by the check below
    check_sizes(state, str(plain_checkpoint))


def _nan_checkpoint(plain_checkpoint, out):
    state = safe_load(plain_checkpoint)
    state["model"]["encoder.sentence_encoder.layers.0.fc1.weight"][0, 0] = float("nan")
    torch.save(state, out)  # a valid file: every CRC-32 matches
    return out


def test_nan_weights_are_refused_naming_the_tensor(plain_checkpoint, tiny_data, tmp_path):
    from fairseq_clear.models import ClearRobertaModel

    model_dir = tmp_path / "m"
    model_dir.mkdir()
    _nan_checkpoint(plain_checkpoint, model_dir / "model.pt")
    with pytest.raises(NonFiniteWeightsError, match=r"layers\.0\.fc1\.weight holds 1 NaN"):
        ClearRobertaModel.from_pretrained(str(model_dir), "model.pt", str(tiny_data))
    # for debugging a diverged run it loads, but no NaN vector is ever handed out
    hub = ClearRobertaModel.from_pretrained(str(model_dir), "model.pt", str(tiny_data),
                                            allow_nonfinite_weights=True)
    from fairseq_clear.models.inference import NonFiniteVectorsError

    with pytest.raises(NonFiniteVectorsError, match="not finite"):
        hub.embed(["a cat sees the ball", "the dog"])


def test_clear_embed_refuses_nan_weights_with_one_line(plain_checkpoint, tiny_data, tmp_path):
    evil = _nan_checkpoint(plain_checkpoint, tmp_path / "nan.pt")
    (tmp_path / "in.txt").write_text("a sentence\n")
    proc = _run([bin_path("clear-embed"), "--checkpoint", evil, "--data", tiny_data, "--cpu",
                 "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"])
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: checkpoint")
    assert "fc1.weight holds 1 NaN" in proc.stderr and not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize("command", ["clear-export-hf", "clear-eval-sts"])
@pytest.mark.parametrize("bomb", ["max_positions", "encoder_layers"])
def test_other_commands_refuse_with_one_line(plain_checkpoint, tiny_data, tmp_path, command, bomb):
    """clear-export-hf and clear-eval-sts --checkpoint load through the same check as clear-embed."""
    from embedding_helpers import write_senteval_tree

    evil = _edited(plain_checkpoint, tmp_path / "evil.pt", **BOMBS[bomb])
    extra = (["--out", tmp_path / "out"] if command == "clear-export-hf" else
             ["--sts-dir", write_senteval_tree(tmp_path / "sts"), "--tasks", "STS-B", "--output", tmp_path / "o.json"])
    proc = _run([bin_path(command), "--checkpoint", evil, "--data", tiny_data, "--cpu", *extra])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: refusing checkpoint") and str(evil) in last and bomb in last, last
    assert not (tmp_path / "out").exists() and not (tmp_path / "o.json").exists()
