"""--tensorboard-logdir records the plugin's metrics (what the README's TensorBoard section says)."""

import struct
from pathlib import Path

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
