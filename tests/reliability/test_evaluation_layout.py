"""evaluation/ split by job, the evaluation commands sharing one module, and design.md's list of
console scripts kept equal to setup.py's."""

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "fairseq_clear" / "cli"


def test_evaluation_is_one_sub_package_per_job():
    root = REPO / "fairseq_clear" / "evaluation"
    packages = {p.parent.name for p in root.glob("*/__init__.py")}
    modules = {p.stem for p in root.glob("*.py")}
    assert packages == {"sts", "senteval", "glue", "multitask"}
    # what is not one command's: the MTEB adapter, the training log and its plot, the rows' names
    assert modules == {"__init__", "mteb_encoder", "training_log", "row_names"}


def test_the_evaluation_commands_import_only_their_shared_module():
    """clear-eval-sts, -senteval and -multitask: what they share is in cli/eval_common.py, none
    imports another's helpers."""
    found = {}
    for path in sorted(CLI.glob("eval_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and (node.module or "").startswith("eval_"):
                found.setdefault(path.stem, set()).add(node.module)
    assert {stem: mods for stem, mods in found.items() if mods != {"eval_common"}} == {}
    assert set(found) == {"eval_sts", "eval_senteval", "eval_multitask"}


def test_clear_eval_multitask_checks_its_json_before_loading(tmp_path, capsys):
    from fairseq_clear.cli import eval_multitask

    out = tmp_path / "no-such-dir" / "result.json"
    with pytest.raises(SystemExit) as stop:
        eval_multitask.main([str(tmp_path / "missing.pt"), "--data", str(tmp_path), "--json", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --json") and "does not exist" in err[0], err
    assert "missing.pt" not in err[0]  # refused before the checkpoint is opened


def test_design_md_lists_every_console_script():
    scripts = set(re.findall(r'"(clear-[a-z-]+) = fairseq_clear\.cli\.', (REPO / "setup.py").read_text(encoding="utf-8")))
    row = next(line for line in (REPO / "docs" / "design.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `fairseq_clear/cli/` |"))
    assert len(scripts) >= 15
    assert set(re.findall(r"\bclear-[a-z]+(?:-[a-z]+)*", row)) == scripts
