"""What keeps ``make test`` inside its budget (docs/design.md, "Tests"): a test starts a real process
only where the process itself is what it checks; every other command runs through
``helpers.run_cli``/``run_captured`` (forked from an interpreter that has already imported it)."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

#: test files that start real processes, and why the process is the subject there
REAL_PROCESSES = {
    "e2e/test_forked_runner.py": "the real command is the reference the forked runner is compared with",
    "e2e/test_preprocess.py": "SIGKILL of clear-prepare's process group mid-encoding",
    "e2e/test_recipe_ux.py": "a terminal (script(1)) around a shell function: no command of ours runs",
    "e2e/test_multitask.py": "SIGKILL mid-epoch and resume (harness.runs.run_until)",
    "e2e/test_hydra.py": "setup.py builds a wheel (a program of its own)",
    "reliability/test_entry_points.py": "SIGKILL of a fairseq-hydra-train run and resume (harness.runs.run_until)",
    "reliability/test_distributed_faults.py": "torchrun workers, one of them killed",
    "reliability/test_reliability_resume.py": "SIGKILL mid-epoch and resume (harness.runs.run_until)",
    "reliability/test_export_safety.py": "an export killed by SIGKILL leaves its staging directory",
    "reliability/test_guest.py": "the heartbeat's watchdog interrupts and kills a blocked process",
    "reliability/test_reliability_checkpoints.py": "a fresh interpreter with torch's unsafe load forced on",
    "reliability/test_fairseq_suite.py": "fairseq's own pytest suite, run twice in interpreters of its own",
    "unit/test_lint.py": "ruff and setup.py are programs of their own",
    "unit/test_import_graph.py": "what a fresh interpreter imports",
}

_STARTS = {"run", "Popen", "check_output", "check_call", "call"}


def _starts(path):
    """Lines of ``path`` that start a real process: subprocess's functions, run_until, and run_cli or
    run_captured with real=True."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _STARTS and isinstance(f.value, ast.Name) \
                and f.value.id == "subprocess":
            out.append(node.lineno)
        elif isinstance(f, ast.Name) and f.id == "run_until":
            out.append(node.lineno)
        elif isinstance(f, ast.Name) and f.id in ("run_cli", "run_captured") and any(
                k.arg == "real" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords):
            out.append(node.lineno)
    return out


def test_real_processes_start_only_where_the_process_is_the_subject():
    found = {}
    for path in sorted(TESTS.glob("*/test_*.py")):
        lines = _starts(path)
        if lines:
            found[path.relative_to(TESTS).as_posix()] = lines
    unexpected = {f: lines for f, lines in found.items() if f not in REAL_PROCESSES}
    assert not unexpected, (
        "these tests start real processes; use helpers.run_cli / run_captured (forked, same output and "
        f"exit status), or add the file to REAL_PROCESSES with the reason the process is the subject: {unexpected}")
    stale = sorted(set(REAL_PROCESSES) - set(found))
    assert not stale, f"REAL_PROCESSES names files that start no process any more: {stale}"


def test_the_guard_sees_each_way_of_starting_a_process(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import subprocess\nsubprocess.run(['x'])\nsubprocess.Popen(['x'])\n"
                     "run_until(['x'], None)\nrun_cli(['x'], real=True)\nrun_cli(['x'])\nrun_captured(['x'])\n")
    assert _starts(probe) == [2, 3, 4, 5]


def test_readme_and_makefile_state_the_same_times():
    """How long `make test` and `make test-fast` take is stated in two places; they agree (the
    numbers come from a measured run: `make test` prints its wall time)."""
    import re

    root = TESTS.parent
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    makefile = " ".join(line.lstrip("# ") for line in (root / "Makefile").read_text(encoding="utf-8").splitlines()
                        if line.startswith("#"))

    def times(text):
        full = re.findall(r"about (\d+) minutes on 2 cores", text)
        fast = re.findall(r"unit[^)]*?about (\d+) seconds", text)
        assert len(full) == len(fast) == 1, (full, fast)
        return int(full[0]), int(fast[0])

    assert times(readme) == times(makefile)
    assert times(readme)[0] < 20  # CI's budget is 90 minutes; the project's is well under 20

