"""`make test` runs the linter: ruff with pyproject.toml's rules over the code and its tests."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ["fairseq_clear", "tests", "benchmarks", "scripts", "examples"]


@pytest.mark.starts_linter
def test_ruff_finds_nothing():
    assert importlib.util.find_spec("ruff") is not None, (
        "ruff is not installed: pip install -e '.[test]' (or pip install ruff)")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *CHECKED],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.starts_linter
def test_one_version_source():
    """setup.py reads the version from the package; nothing else states it."""
    import re

    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    assert not re.search(r"version\s*=\s*['\"]", setup), "setup.py states a version of its own"
    result = subprocess.run([sys.executable, "setup.py", "--version"], cwd=ROOT, capture_output=True, text=True)
    init = (ROOT / "fairseq_clear" / "__init__.py").read_text(encoding="utf-8")
    assert result.stdout.strip().splitlines()[-1] == re.search(r'__version__ = "([^"]+)"', init).group(1)
