"""Outputs checked before the work and written atomically, for the commands that write files
beside their inputs (clear-plot, clear-glue summarize): an output that is an input or another
output is refused in one line, nothing is written, and the input stays as it was."""

import pytest

from helpers import bin_path, run_captured

#: fairseq-train's json log of three updates
LOG = "".join(f'2026-01-01 00:00:00 | INFO | train_inner | {{"epoch": 1, "loss": "{5 - u / 10:.3f}", '
              f'"num_updates": "{u}"}}\n' for u in range(1, 4))


def _log(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG, encoding="utf-8")
    return path


def _one_line(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and all(n in last for n in needles), last


@pytest.mark.parametrize("which", ["--out", "--json"])
def test_clear_plot_refuses_to_write_over_its_log(tmp_path, which):
    log = _log(tmp_path)
    before = log.read_bytes()
    args = {"--out": tmp_path / "c.png", "--json": None}
    args[which] = log
    cmd = [bin_path("clear-plot"), log, "--out", args["--out"]] + (["--json", args["--json"]] if args["--json"] else [])
    _one_line(run_captured(cmd), which, "same file as LOG")
    assert log.read_bytes() == before


def test_clear_plot_refuses_one_path_for_both_outputs(tmp_path):
    log = _log(tmp_path)
    proc = run_captured([bin_path("clear-plot"), log, "--out", tmp_path / "c.png", "--json", tmp_path / "c.png"])
    _one_line(proc, "--out", "--json", "the same file")
    assert not (tmp_path / "c.png").exists()


def test_clear_plot_writes_both_and_leaves_no_temporary_file(tmp_path):
    pytest.importorskip("matplotlib")
    log = _log(tmp_path)
    proc = run_captured([bin_path("clear-plot"), log, "--out", tmp_path / "c.png", "--json", tmp_path / "c.json"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "c.json").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "c.png", "train.log"]


def test_glue_summarize_refuses_json_over_its_log(tmp_path):
    log = _log(tmp_path)
    before = log.read_bytes()
    proc = run_captured([bin_path("clear-glue"), "summarize", log, "SST-2", "--json", log])
    _one_line(proc, "--json", "same file as LOG")
    assert log.read_bytes() == before


def test_a_full_disk_is_one_line_naming_the_output_and_keeps_the_previous_file(tmp_path, monkeypatch, capsys):
    import errno
    import os

    from fairseq_clear.cli import plot

    log = _log(tmp_path)
    (tmp_path / "c.json").write_text("previous", encoding="utf-8")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(SystemExit) as e:
        plot.main([str(log), "--out", str(tmp_path / "c.png"), "--json", str(tmp_path / "c.json")])
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"error: --json '{tmp_path / 'c.json'}': no space left on device"), last
    assert (tmp_path / "c.json").read_text(encoding="utf-8") == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "train.log"]  # no temporary file left


def test_a_full_disk_nobody_named_is_still_one_line(capsys):
    import errno

    from fairseq_clear.cli import command

    @command
    def main():
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out.npy")

    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error: no space left on device writing '/data/out.npy'" in err, err
