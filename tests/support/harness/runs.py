"""Run ``fairseq-train`` as a subprocess, kill it at a chosen moment, compare runs.

Everything here works on the real CLI: the resume guarantee is about what a
user's restarted command does, not about an in-process imitation of it.
"""

import os
import re
import signal
import subprocess
import time
from typing import Callable, Dict, List, Optional, Sequence

import torch


def logged(output: str, tag: str = "train_inner") -> List[dict]:
    """The JSON records fairseq logged under ``tag`` (``--log-format json``; fairseq-train's
    "| tag |" lines and fairseq-hydra-train's "[tag][INFO] - " ones): the package's reader."""
    from fairseq_clear.evaluation.training_log import records

    return records(output.splitlines(), tag)


def by_update(records: Sequence[dict]) -> Dict[int, dict]:
    return {int(r["num_updates"]): r for r in records}


def _env(env: Optional[dict]) -> dict:
    full = dict(os.environ)
    full.setdefault("OMP_NUM_THREADS", "1")
    full["PYTHONUNBUFFERED"] = "1"
    if env:
        full.update(env)
    return full


def run_until(
    args: Sequence[str],
    stop: Callable[[str], bool],
    sig: int = signal.SIGKILL,
    env: Optional[dict] = None,
    timeout: float = 900,
    cwd=None,
    on_start: Optional[Callable[[subprocess.Popen], None]] = None,
):
    """Start ``args``; send ``sig`` to its whole process group at the first line where ``stop(line)``.

    Returns ``(output, return code, whether the signal was sent)``. The process
    group matters: with ``--num-workers > 0`` or ``torchrun`` the children must die
    too, as they do when a machine is pre-empted. After ``timeout`` seconds (output
    or not) the group is killed and :class:`TimeoutError` raised with the output.
    """
    import queue
    import threading

    proc = subprocess.Popen(
        [str(a) for a in args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(env),
        cwd=cwd,
        start_new_session=True,
    )
    lines_q: "queue.Queue" = queue.Queue()

    def pump():
        for line in proc.stdout:
            lines_q.put(line)
        lines_q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    if on_start is not None:
        on_start(proc)
    lines, killed = [], False
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                line = lines_q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line:
                lines.append(line)
                if not killed and stop(line):
                    os.killpg(proc.pid, sig)
                    killed = True
            if time.monotonic() > deadline:
                raise TimeoutError("".join(lines[-50:]))
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        # torchrun starts each worker in a session of its own: collect them first
        leftovers = _descendants(proc.pid)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        for pid in [proc.pid] + leftovers:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    return "".join(lines), rc, killed


def _descendants(pid: int) -> List[int]:
    out, todo = [], [pid]
    while todo:
        for child in child_pids(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def saved_at(update: int) -> Callable[[str], bool]:
    """A ``stop`` predicate: true once the checkpoint of update ``update`` is on disk."""
    pattern = re.compile(rf"Saved checkpoint .*@ {update} updates")
    return lambda line: bool(pattern.search(line))


def logged_update(update: int) -> Callable[[str], bool]:
    """A ``stop`` predicate: true once update ``update`` has been logged."""
    needle = f'"num_updates": "{update}"'
    return lambda line: "| train_inner |" in line and needle in line


def load_state(path) -> dict:
    from fairseq_clear.checkpoint_safety import safe_load

    return safe_load(path)


def max_abs_diff(a: dict, b: dict) -> Dict[str, float]:
    """Per-key largest absolute difference between two tensor dicts (inf for a missing key or shape)."""
    out = {}
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b or a[key].shape != b[key].shape:
            out[key] = float("inf")
        else:
            out[key] = (a[key].double() - b[key].double()).abs().max().item() if a[key].numel() else 0.0
    return out


def optimizer_tensors(state: dict) -> Dict[str, torch.Tensor]:
    """Flatten the optimizer's per-parameter state (e.g. Adam's moments) into a tensor dict."""
    out = {}
    opt = state.get("last_optimizer_state") or {}
    for pid, slots in (opt.get("state") or {}).items():
        for name, value in slots.items():
            if torch.is_tensor(value):
                out[f"{pid}.{name}"] = value
    return out


def training_config(data, *extra, arch: str = "clear_roberta_tiny"):
    """The config ``fairseq-train DATA --user-dir ... --task clear ... *extra`` would build."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_clear

    user_dir = os.path.dirname(os.path.abspath(fairseq_clear.__file__))
    argv = [
        str(data), "--user-dir", user_dir, "--task", "clear", "--criterion", "clear",
        "--arch", arch, "--cpu", *[str(a) for a in extra],
    ]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, argv)
    return convert_namespace_to_omegaconf(args)


def build_task(data, *extra, split: str = "train"):
    """``(task, cfg)`` with ``split`` loaded, as fairseq-train sets them up."""
    from fairseq import tasks

    cfg = training_config(data, *extra)
    task = tasks.setup_task(cfg.task)
    task.load_dataset(split, combine=False, epoch=1)
    return task, cfg


def epoch_batches(task, split: str, epoch_itr, epochs: int):
    """The batches of ``epochs`` consecutive epochs, as fairseq's training loop draws them."""
    out = []
    for _ in range(epochs):
        itr = epoch_itr.next_epoch_itr(shuffle=True)
        out.append(list(itr))
    return out


def child_pids(pid: int) -> List[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return sorted(set(out))


def torchrun_workers(torchrun_pid: int) -> Dict[int, int]:
    """``{rank: pid}`` of the workers a torchrun process started (read from their environment)."""
    ranks = {}
    for pid in child_pids(torchrun_pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(
                    kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv
                )
        except OSError:
            continue
        if b"RANK" in env:
            ranks[int(env[b"RANK"])] = pid
    return ranks
