"""Crafted config values and damaged files that gave a traceback or a silent wrong answer now give
one line naming the file or option (issue 38: L3, L14, L16)."""

import math

import pytest
import torch

import fairseq_clear  # noqa: F401
from fairseq_clear.checkpoint_safety import safe_load
from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_sizes
from helpers import bin_path, run_captured, run_cli, train_args

MEMORY_CAP = 3 * 2**30


def _one_error_line(proc, *needles):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("error: ") and all(n in last for n in needles), last
    return last


def _crafted(checkpoint, out, section, **fields):
    state = safe_load(checkpoint)
    target = state["cfg"][section]
    for key, value in fields.items():
        if isinstance(target, dict) or hasattr(target, "__setitem__") and not hasattr(target, "__dict__"):
            target[key] = value
        else:
            setattr(target, key, value)
    torch.save(state, out)
    return out


def _embed(checkpoint, data, tmp_path):
    (tmp_path / "in.txt").write_text("a sentence\nanother one\n", encoding="utf-8")
    return run_captured([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--cpu",
                         "--input", tmp_path / "in.txt", "--output", tmp_path / "o.npy"], memory_cap=MEMORY_CAP)


# ---- L16: numeric config values a loader took as they came --------------------------------------

@pytest.mark.parametrize("field,value", [("layernorm_eps", math.inf), ("layernorm_eps", 0.0),
                                         ("layernorm_eps", math.nan), ("dropout", 1.5),
                                         ("attention_dropout", -0.1), ("layernorm_eps", "1e-5")])
def test_model_rates_are_checked_at_load(plain_checkpoint, tiny_data, tmp_path, field, value):
    evil = _crafted(plain_checkpoint, tmp_path / "evil.pt", "model", **{field: value})
    with pytest.raises(CheckpointSizeError, match=f"its config's {field} is"):
        check_sizes(safe_load(evil), str(evil))
    proc = _embed(evil, tiny_data, tmp_path)
    _one_error_line(proc, str(evil), field)
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("dims", ["0,-5,999999", "64,x", "999999", "0"])
def test_matryoshka_sizes_of_a_checkpoint_are_checked_at_load(plain_checkpoint, tiny_data, tmp_path, dims):
    """clear-eval-sts printed rows @0 and @-5 for "0,-5,999999"."""
    from embedding_helpers import write_senteval_tree

    evil = _crafted(plain_checkpoint, tmp_path / "evil.pt", "criterion", matryoshka_dims=dims)
    proc = run_captured([bin_path("clear-eval-sts"), "--checkpoint", evil, "--data", tiny_data, "--cpu",
                         "--sts-dir", write_senteval_tree(tmp_path / "sts"), "--tasks", "STS-B",
                         "--output", tmp_path / "o.json"], memory_cap=MEMORY_CAP)
    _one_error_line(proc, str(evil), "--matryoshka-dims")
    assert not (tmp_path / "o.json").exists()


def test_trained_matryoshka_sizes_still_load(plain_checkpoint, tiny_data, tmp_path):
    from fairseq_clear.models import ClearRobertaModel

    model = tmp_path / "m"
    model.mkdir()
    _crafted(plain_checkpoint, model / "model.pt", "criterion", matryoshka_dims="16,32")
    hub = ClearRobertaModel.from_pretrained(str(model), "model.pt", str(tiny_data))
    assert hub.matryoshka_dims == [32, 16]


# ---- L3: clear-import-hf --tolerance ----------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf"])
def test_import_tolerance_must_be_finite_and_positive(tmp_path, value):
    from fairseq_clear.export.from_hf import ImportHfError, import_hf

    proc = run_captured([bin_path("clear-import-hf"), tmp_path, tmp_path / "out", "--tolerance", value])
    assert proc.returncode == 2 and "--tolerance" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(ImportHfError, match="--tolerance must be finite and > 0"):
        import_hf(str(tmp_path), str(tmp_path / "out"), tolerance=float(value))


# ---- L14: tracebacks that are now one line ----------------------------------------------------------

def test_a_file_of_zeros_as_a_checkpoint_is_one_line(tiny_data, tmp_path):
    """A 100 GB sparse file of zeros: refused from its first bytes, nothing else read."""
    zeros = tmp_path / "zeros.pt"
    with open(zeros, "wb") as f:
        f.truncate(100 * 2**30)
    _one_error_line(_embed(zeros, tiny_data, tmp_path), str(zeros), "not a file torch.save wrote")


def test_a_deeply_nested_tokenizer_record_is_one_line(plain_checkpoint, tiny_data, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    (data / "clear_tokenizer.json").write_text("[" * 100_000 + "]" * 100_000)
    _one_error_line(_embed(plain_checkpoint, data, tmp_path), "clear_tokenizer.json", "RecursionError")


def test_a_directory_where_the_save_dir_lock_goes_is_one_line(tiny_data, tmp_path):
    save = tmp_path / "save"
    (save / ".fairseq_clear.lock").mkdir(parents=True)
    proc = run_cli(train_args(tiny_data, save, max_update=1), check=False)
    assert proc.returncode != 0
    # fairseq-train prints a start-up error with its traceback (as every refusal of the task's): the
    # error is ours, naming the option and the file, not a bare IsADirectoryError
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("fairseq_clear.fairseq_fixes.save_dir_lock.SaveDirLockError: "), last
    assert f"--save-dir '{save}': cannot open the run's lock file" in last, last
    assert (save / ".fairseq_clear.lock").is_dir() and not (save / "checkpoint_last.pt").exists()
