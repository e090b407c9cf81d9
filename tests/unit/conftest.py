"""The unit tier (``make test-fast``): library code only, no command-line tool and no training run."""

import os
import subprocess
import sys

import pytest

#: what the e2e tier starts: the interpreter and the console scripts beside it (fairseq-train,
#: clear-*, torchrun), and the shell recipes. A library's own probe (numpy's lscpu) is not a test's.
_ENV_BIN = os.path.dirname(sys.executable)
_SHELLS = {"bash", "sh"}


def _program(args) -> str:
    first = args if isinstance(args, (str, bytes, os.PathLike)) else args[0]
    return os.fsdecode(first).split()[0] if isinstance(args, (str, bytes)) else os.fsdecode(first)


@pytest.fixture(autouse=True)
def _no_tool_runs(monkeypatch, request):
    """A test here that runs Python, a console script or a shell recipe fails, naming it: such a test
    belongs in tests/e2e/. The linter's tests (marked ``starts_linter``) are the one exception."""
    if request.node.get_closest_marker("starts_linter"):
        return
    popen_init = subprocess.Popen.__init__

    def checked(self, args, *rest, **kwargs):
        program = _program(args)
        if os.path.dirname(os.path.abspath(program)) == _ENV_BIN or os.path.basename(program) in _SHELLS \
                or os.path.abspath(program) == os.path.abspath(sys.executable):
            raise AssertionError(f"tests/unit runs no tool, this test started {args!r}: move it to tests/e2e/")
        popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", checked)
