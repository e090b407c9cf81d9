"""The real fairseq-train CLI with --user-dir fairseq_clear on a tiny binarized corpus."""

import torch

from harness.runs import logged
from helpers import run_cli, train_args


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def test_train_logs_falling_losses_saves_reloads_and_resumes(tiny_data, tmp_path):
    save = tmp_path / "ckpt"
    out = run_cli(train_args(tiny_data, save, max_update=40, batch_size=32)).stdout
    records = logged(out)
    assert len(records) == 40, out[-3000:]
    for key in ("loss", "mlm_loss", "cl_loss", "cl_acc"):
        assert key in records[0], f"{key} not logged: {records[0]}"
    first = mean(float(r["loss"]) for r in records[:5])
    last = mean(float(r["loss"]) for r in records[-5:])
    assert last < first - 0.5, f"loss did not fall: {first:.3f} -> {last:.3f}"
    assert mean(float(r["mlm_loss"]) for r in records[-5:]) < mean(
        float(r["mlm_loss"]) for r in records[:5]
    )

    ckpt = save / "checkpoint_last.pt"
    assert ckpt.is_file()
    # torch >= 2.6 default (weights_only=True) plus the plugin's allow-list
    import fairseq_clear  # noqa: F401
    from fairseq_clear.checkpoint_safety import safe_load

    state = safe_load(ckpt)
    assert any(k.startswith("projection_head.") for k in state["model"])
    assert torch.__version__ >= "2.6"

    # the same command with a higher --max-update resumes from checkpoint_last.pt
    resumed = run_cli(train_args(tiny_data, save, max_update=45, batch_size=32)).stdout
    assert "Loaded checkpoint" in resumed and "@ 40 updates" in resumed, resumed[-3000:]
    more = logged(resumed)
    assert [r["num_updates"] for r in more] == [str(u) for u in range(41, 46)]
