"""Issue 28: what the user's model is survives import -> training -> export; paths mean what
they mean in a shell; recipes pick continued-training values; a run never makes the model
silently worse (the start is scored and kept when nothing beats it)."""

import os
import shutil

import numpy as np
import pytest

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
