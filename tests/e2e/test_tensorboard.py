"""--tensorboard-logdir records the plugin's metrics (what docs/training.md's "Watching a run" says);
clear-plot draws them from the text log."""

import struct
from pathlib import Path

import pytest

from embedding_helpers import write_stsb
from helpers import run_cli, train_args


def _scalars(logdir: Path):
    from tensorboardX.proto import event_pb2

    tags = {}
    for path in logdir.rglob("events.out.tfevents.*"):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):  # TFRecord: length, crc, payload, crc
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            payload = data[pos + 12: pos + 12 + length]
            pos += 12 + length + 4
            event = event_pb2.Event()
            event.ParseFromString(payload)
            for value in event.summary.value:
                tags.setdefault(f"{path.parent.name}/{value.tag}", []).append(value.simple_value)
    return tags


def test_tensorboard_records_contrastive_metrics_and_sts(tiny_data, tmp_path):
    write_stsb(tmp_path / "sts-dev.csv", n=40)
    logdir = tmp_path / "tb"
    run_cli(train_args(tiny_data, tmp_path / "save", "--tensorboard-logdir", logdir, "--sts-validation", tmp_path,
                       "--validate-interval-updates", "4", max_update=8, validate=True))
    tags = _scalars(logdir)
    for tag in ("train_inner/cl_loss", "train_inner/cl_acc", "train_inner/mlm_loss", "train_inner/loss",
                "valid/sts_b_spearman"):
        assert tag in tags and tags[tag], (tag, sorted(tags))
    assert len(tags["train_inner/cl_loss"]) == 8


@pytest.mark.parametrize("log_format", ["json", "simple"])
def test_clear_plot_draws_losses_and_sts_from_a_training_log(tiny_data, tmp_path, log_format):
    """clear-plot on a real fairseq-train log: every logged update and validation is a point."""
    import json
    import re

    from helpers import bin_path

    write_stsb(tmp_path / "sts-dev.csv", n=40)
    proc = run_cli(train_args(tiny_data, tmp_path / "save", "--sts-validation", tmp_path,
                              "--validate-interval-updates", "3", "--log-format", log_format,
                              max_update=6, validate=True))
    log = tmp_path / "train.log"
    log.write_text(proc.stdout, encoding="utf-8")
    logged_sts = [float(m) for line in proc.stdout.splitlines() if "| valid |" in line
                  for m in re.findall(r'sts_b_spearman"?[: ]+"?([\d.]+)', line)]
    assert len(logged_sts) == 2
    out = run_cli([bin_path("clear-plot"), log, "--out", tmp_path / "curves.png", "--json", tmp_path / "c.json"]).stdout
    assert "plot:" in out
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (curves,) = json.loads((tmp_path / "c.json").read_text()).values()
    assert [u for u, _ in curves["cl_loss"]] == list(range(1, 7))
    assert {"loss", "mlm_loss", "cl_acc"} <= set(curves)
    assert [u for u, _ in curves["sts_b_spearman"]] == [3, 6]
    assert [v for _, v in curves["sts_b_spearman"]] == logged_sts


def test_clear_plot_refuses_a_log_without_json_records(tmp_path):
    from helpers import bin_path

    log = tmp_path / "plain.log"
    log.write_text("2026-01-01 | INFO | fairseq_cli.train | epoch 001 | loss 3.2\n", encoding="utf-8")
    proc = run_cli([bin_path("clear-plot"), log, "--out", tmp_path / "c.png"], check=False)
    assert proc.returncode == 2
    assert f"'{log}' holds no train_inner or valid records" in proc.stdout and "--log-format json" in proc.stdout
    assert not (tmp_path / "c.png").exists()


def test_clear_plot_names_runs_that_share_a_folder_name(tmp_path):
    """Two run.sh outputs: run1/checkpoints/train.log and run2/checkpoints/train.log are two runs
    (both used to be 'checkpoints/train.log', the first dropped)."""
    import json

    from helpers import bin_path

    pytest.importorskip("matplotlib")
    logs = []
    for i, run in enumerate(["run1", "run2", "x/run1"]):
        log = tmp_path / run / "checkpoints" / "train.log"
        log.parent.mkdir(parents=True)
        log.write_text("".join(
            f'2026-01-01 00:00:00 | INFO | train_inner | {{"epoch": 1, "update": {u}, "loss": "{3 - u / 10 + i}", '
            f'"num_updates": "{u}"}}\n' for u in (1, 2)))
        logs.append(log)
    run_cli([bin_path("clear-plot"), *logs, "--out", tmp_path / "c.png", "--json", tmp_path / "c.json"], cwd=tmp_path)
    curves = json.loads((tmp_path / "c.json").read_text())
    assert sorted(curves) == sorted([f"{tmp_path.name}/run1/checkpoints/train.log", "run2/checkpoints/train.log",
                                     "x/run1/checkpoints/train.log"]), list(curves)
    assert [c["loss"][0][1] for c in curves.values()] == [2.9, 3.9, 4.9]
