"""The §4.1 recipes (examples/pretrain_paper): each script's fairseq-train command line, caught
by a stand-in torchrun on PATH and parsed by fairseq's own parser, gives the paper's
8,192-sentence contrastive candidate set (per-GPU batch x update-freq x GPUs, one problem)."""

import json
import math
import os
import stat
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "examples" / "pretrain_paper"

STANDIN = """#!/usr/bin/env python3
import json, sys
json.dump(sys.argv[1:], open({out!r}, "w"))
"""


def _recipe_args(tmp_path, script, *extra):
    """The torchrun arguments the recipe would run (torchrun replaced by a recorder)."""
    from helpers import bin_path, run_cli

    bindir = tmp_path / "bin"
    bindir.mkdir()
    out = tmp_path / "argv.json"
    shim = bindir / "torchrun"
    shim.write_text(STANDIN.format(out=str(out)))
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bindir}:{Path(bin_path('fairseq-train')).parent}:{os.environ['PATH']}"}
    run_cli(["bash", RECIPES / script, tmp_path / "data-bin", *extra], env=env)
    return json.loads(out.read_text())


def _parse(argv):
    """torchrun's own options, and fairseq's parsed config of the training command."""
    import fairseq_clear  # noqa: F401
    from fairseq import options

    train = next(i for i, a in enumerate(argv) if a.endswith("fairseq-train"))
    launcher = dict(zip(argv[:train:2], argv[1:train:2]))
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, argv[train + 1:])
    return launcher, args


@pytest.mark.parametrize("script,gpus,accumulate", [
    ("train_256gpu.sh", 256, False), ("train_8gpu.sh", 8, True), ("train_1gpu.sh", 1, True),
])
def test_recipe_has_the_papers_candidate_set(tmp_path, script, gpus, accumulate):
    launcher, args = _parse(_recipe_args(tmp_path, script))
    nodes, per_node = int(launcher["--nnodes"]), int(launcher["--nproc_per_node"])
    assert nodes * per_node == gpus
    assert args.batch_size * args.update_freq[0] * gpus == 8192
    assert args.accumulate_contrastive is accumulate
    # without accumulation every micro-batch would be its own, smaller, problem
    assert accumulate or args.update_freq[0] == 1
    if gpus > 1:
        assert args.gather_negatives == "on"
        assert not accumulate or args.ddp_backend == "legacy_ddp"
    else:
        assert args.gather_negatives == "auto"
    assert (args.sample_break_mode, args.tokens_per_sample, args.lr[0]) == ("complete", 512, 6e-4)


@pytest.mark.parametrize("config,script,extra", [
    ("clear_base", "train_256gpu.sh", []),
    ("clear_8gpu", "train_8gpu.sh", []),
    # the paper trained base only: large is §4.1 with RoBERTa's large encoder, lr and warm-up
    ("clear_large", "train_256gpu.sh", ["--arch", "clear_roberta_large", "--lr", "4e-4", "--warmup-updates", "30000",
                                        "--save-dir", "checkpoints/clear-large-del-word"]),
])
def test_each_hydra_recipe_says_what_its_shell_recipe_says(tmp_path, config, script, extra):
    """fairseq_clear/config/pretraining/CONFIG.yaml, each value as its fairseq-train option, and the shell
    recipe's command line, both parsed by fairseq's parser: every option equal (tests/e2e/test_hydra.py
    checks that hydra reads a YAML as fairseq-train reads those options)."""
    from fairseq import options

    from helpers import USER_DIR, recipe_options

    _, shell = _parse(_recipe_args(tmp_path, script, *extra))
    yaml = options.parse_args_and_arch(options.get_training_parser(),
                                       [str(tmp_path / "data-bin"), "--user-dir", USER_DIR, *recipe_options(config)])
    assert set(vars(yaml)) == set(vars(shell))
    unset = lambda v: isinstance(v, float) and math.isnan(v)  # noqa: E731  (an option's "not given")
    differ = {k: (v, getattr(shell, k)) for k, v in vars(yaml).items()
              if v != getattr(shell, k) and not (unset(v) and unset(getattr(shell, k)))}
    assert not differ, differ
    assert (yaml.task, yaml.criterion, yaml.lr[0]) == ("clear", "clear", 4e-4 if "large" in config else 6e-4)

