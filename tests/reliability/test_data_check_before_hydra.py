"""Issue 40: fairseq-train on a DATA the plugin's task cannot read refuses in one ``error:`` line, with
nothing before it: the check runs before fairseq converts its options through hydra, whose ~18 lines
of deprecation warnings used to come first. A stock task gets fairseq's conversion unchanged."""

from helpers import USER_DIR, bin_path, run_captured


def test_fairseq_train_without_dict_txt_prints_only_the_error_line(tmp_path):
    (tmp_path / "data").mkdir()
    proc = run_captured([bin_path("fairseq-train"), tmp_path / "data", "--user-dir", USER_DIR, "--task", "clear",
                         "--arch", "clear_roberta_tiny", "--cpu", "--save-dir", tmp_path / "save"])
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: ") and "has no dict.txt" in lines[0], lines


def test_pairs_data_without_dict_txt_is_refused_before_hydra(tmp_path):
    """contrastive_pairs reads its own options (the anchor column) from fairseq's parsed arguments."""
    (tmp_path / "pairs").mkdir()
    proc = run_captured([bin_path("fairseq-train"), tmp_path / "pairs", "--user-dir", USER_DIR, "--task",
                         "contrastive_pairs", "--arch", "clear_roberta_tiny", "--cpu", "--save-dir", tmp_path / "s"])
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert "has neither dict.txt nor" in lines[0] and "clear-prepare-pairs" in lines[0], lines


def test_a_stock_task_is_converted_by_fairseq_unchanged(tmp_path):
    """fairseq-train's conversion is the plugin's wrapper, which checks only the plugin's tasks:
    fairseq's masked_lm on the same empty directory is converted (its task fails later, as fairseq's)."""
    import fairseq_cli.train
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf as fairseqs

    import fairseq_clear  # noqa: F401  (installs the fixes)

    assert fairseq_cli.train.convert_namespace_to_omegaconf is not fairseqs
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(tmp_path), "--task", "masked_lm", "--arch", "roberta_base", "--criterion", "masked_lm", "--cpu"])
    cfg = fairseq_cli.train.convert_namespace_to_omegaconf(args)
    assert cfg.task._name == "masked_lm" and cfg.task.data == str(tmp_path)
