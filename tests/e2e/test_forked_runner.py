"""The forked runner (tests/support/harness/forked.py) does what the real command does.

Every e2e test that runs a console script goes through it (helpers.run_cli), so these checks are
what lets those tests stand for the real commands: the same log and checkpoint for a CLEAR run,
the same output and exit status for each way a command can end, shell recipes through the PATH
shims, and a real process wherever the runner could not be exact.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from harness import forked
from harness.runs import load_state
from helpers import USER_DIR, bin_path, run_cli, train_args

#: what differs between two runs of one command: times, speeds and the run's own save directory
_TIMING = [
    (re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| "), ""),
    (re.compile(r'"(\w*(?:wps|ups|wall))": "[^"]*"'), r'"\1": T'),
    (re.compile(r"(done training in|writing took) [\d.]+ seconds"), r"\1 T seconds"),
]


def _normal(output, save_dir):
    lines = []
    for line in output.replace(str(save_dir), "SAVE").splitlines():
        for pattern, repl in _TIMING:
            line = pattern.sub(repl, line)
        lines.append(line)
    return lines


def _env(**extra):
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]), **extra)


def test_a_clear_run_gives_the_real_commands_log_and_checkpoint(tiny_data, tmp_path):
    """One CLEAR run (augmentations, validation, two saves) as the console script and forked."""
    args = lambda save: train_args(tiny_data, save, "--augmentations", "del-word,reorder",  # noqa: E731
                                   "--save-interval-updates", "3", max_update=6, validate=True)
    real_save, forked_save = tmp_path / "real", tmp_path / "forked"
    real = subprocess.run([str(a) for a in args(real_save)], env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    ran = forked.run(args(forked_save), env=_env(), timeout=600)
    assert ran.returncode == real.returncode == 0, ran.stdout[-3000:]
    assert forked.route(args(forked_save), _env(), os.getcwd()) is not None
    assert _normal(ran.stdout, forked_save) == _normal(real.stdout, real_save)
    assert '"num_updates": "6"' in ran.stdout and "| valid |" in ran.stdout
    for name in ("checkpoint_last.pt", "checkpoint_1_3.pt"):
        a, b = load_state(real_save / name), load_state(forked_save / name)
        for key in a["model"]:
            assert torch.equal(a["model"][key], b["model"][key]), (name, key)
        assert a["extra_state"]["train_iterator"] == b["extra_state"]["train_iterator"]


_SCRIPT = textwrap.dedent("""
    import sys, warnings
    print("argv", sys.argv[1:], "path0", sys.path[0], __name__, sorted(k for k in globals() if k.startswith("__")))
    warnings.warn("from far away", UserWarning, stacklevel=4)
    print(sys.stdin.readline().strip(), file=sys.stderr)
    how = sys.argv[1]
    if how == "raise":
        try:
            {}["key"]
        except KeyError as e:
            raise RuntimeError("wrapped") from e
    if how == "exit-message":
        sys.exit("a message")
    if how == "exit-code":
        sys.exit(3)
    if how == "interrupt":
        raise KeyboardInterrupt
    import atexit, threading
    atexit.register(lambda: print("at exit"))
    threading.Thread(target=lambda: print("thread done")).start()
""")


@pytest.mark.parametrize("how", ["raise", "exit-message", "exit-code", "interrupt", "normal"])
def test_every_way_a_script_ends_gives_the_same_output_and_status(tmp_path, how):
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)
    args = [sys.executable, "script.py", how]
    real = subprocess.run(args, cwd=tmp_path, env=_env(), input="from stdin\n", capture_output=True, text=True)
    ran = forked.run(args, cwd=tmp_path, env=_env(), input="from stdin\n", stderr=subprocess.PIPE)
    assert (ran.returncode, ran.stdout, ran.stderr) == (real.returncode, real.stdout, real.stderr)
    assert "from stdin" in ran.stderr and "sys:1: UserWarning" in ran.stderr
    expected = {"raise": 1, "exit-message": 1, "exit-code": 3, "interrupt": -signal.SIGINT, "normal": 0}[how]
    assert ran.returncode == expected


@pytest.mark.parametrize("command", [
    ["fairseq-train", "--task", "no-such-task"],          # argparse's error: exit 2
    ["fairseq-train", "--user-dir", USER_DIR, "--arch"],  # the plugin's dir preloaded
    ["clear-embed", "--checkpoint", "/nonexistent.pt", "--data", "/nonexistent"],
    [sys.executable, "-m", "fairseq_clear.cli.eval_sts", "--help"],  # (clear-user-dir, -m: the recipe below)
])
def test_console_scripts_and_modules_end_as_the_real_ones(tmp_path, command):
    args = [bin_path(command[0]) if not command[0].startswith("/") else command[0], *command[1:]]
    real = subprocess.run(args, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    ran = forked.run(args, cwd=tmp_path, env=_env(), stderr=subprocess.PIPE, timeout=300)
    assert forked.route(args, _env(), str(tmp_path)) is not None
    assert (ran.returncode, ran.stdout, ran.stderr) == (real.returncode, real.stdout, real.stderr)


def test_a_shell_recipe_runs_its_commands_through_the_shims(tmp_path):
    recipe = tmp_path / "recipe.sh"
    recipe.write_text("set -e\nclear-user-dir\npython -m fairseq_clear.cli.user_dir\n"
                      "python -c 'import sys; print(sys.argv[1:])' x\nclear-embed --bogus || echo \"rc=$?\"\n")
    real = run_cli(["bash", recipe], cwd=tmp_path, real=True)
    started = time.monotonic()
    ran = run_cli(["bash", recipe], cwd=tmp_path)
    assert ran.stdout == real.stdout and "rc=2" in ran.stdout
    env = _env()
    shims = forked.shim_dir(env)
    assert os.path.isfile(os.path.join(shims, "clear-embed")) and forked.SOCKET_ENV in env
    assert time.monotonic() - started < 60


def test_what_the_runner_cannot_do_exactly_runs_a_real_process(tmp_path):
    env, cwd = _env(), str(tmp_path)
    assert forked.route([sys.executable, "-X", "dev", "x.py"], env, cwd) is None
    assert forked.route([bin_path("torchrun"), "x.py"], env, cwd) is None
    assert forked.route(["bash", "-c", "true"], env, cwd) is None
    assert forked.route([sys.executable, "-m", "pytest"], env, cwd) is None
    (tmp_path / "faults").mkdir()
    (tmp_path / "faults" / "sitecustomize.py").write_text("")
    assert forked.route([bin_path("clear-user-dir")], dict(env, PYTHONPATH=str(tmp_path / "faults")), cwd) is None
    assert forked.route([bin_path("clear-user-dir")], dict(env, PYTHONPATH=str(tmp_path)), cwd) is not None
    other = forked.route([bin_path("fairseq-train"), "--user-dir", str(tmp_path / "plugin")], env, cwd)
    assert other is not None and other["user_dir"] is None  # the run imports its own user dir
    ours = forked.route([bin_path("fairseq-train"), "--user-dir", USER_DIR], env, cwd)
    assert ours["user_dir"] == USER_DIR and ours["modules"] == ["fairseq_cli.train"]
    hydra = forked.route([bin_path("fairseq-hydra-train"), f"common.user_dir={USER_DIR}"], env, cwd)
    assert hydra["user_dir"] is None and hydra["modules"] == ["fairseq_cli.hydra_train"]  # imported in its main
    # the import-time environment is part of a zygote's key; the rest is the run's
    assert forked.import_key(dict(env, NLTK_DATA="/x")) != forked.import_key(env)
    assert forked.import_key(dict(env, SAVE_DIR="/x")) == forked.import_key(env)
    assert forked.import_key(dict(env, PYTHON="python")) == forked.import_key(env)  # a recipe's knob
    assert forked.run([sys.executable, "-c", "import sys; print(sys.argv)"], env=env).stdout == "['-c']\n"


def test_a_run_whose_caller_goes_away_is_killed_with_its_group(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text("import subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                      "print(child.pid, flush=True)\ntime.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        forked.run([sys.executable, script], cwd=tmp_path, env=_env(), timeout=3)
    proc = forked.popen([sys.executable, script], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, text=True)
    grandchild = int(proc.stdout.readline())
    proc._sock.close()  # the test process's end is gone: the zygote kills the run's group
    for _ in range(100):
        if not os.path.exists(f"/proc/{grandchild}") or open(f"/proc/{grandchild}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the run's child outlived its caller")
