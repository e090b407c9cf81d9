#!/usr/bin/env python
"""A rank that hangs (SIGSTOP: alive, silent) or dies (SIGKILL) in a 2-rank CPU job.

    python scripts/reliability/check_hung_rank.py [--heartbeat-timeout 5] [--mode stop|kill|both]
        [--control]

* kill: the survivor's collective fails at once and torchrun stops the job (seconds).
* stop: with --heartbeat-timeout H, fairseq's watchdog sends SIGINT after H s without
  progress; the plugin kills the process HEARTBEAT_KILL_GRACE_S later if SIGINT could not
  interrupt the blocked collective; torchrun then stops the job (it waits up to 30 s
  for the stopped rank before SIGKILL). Bound: H + 10 + 30 s plus start-up.
* --control: the same hang without --heartbeat-timeout, to show it would wait for
  gloo's 30-minute timeout (checked for 90 s, then killed).
Exit status 0 when every case ends as described.
"""

import argparse
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))

from helpers import bin_path, make_binarized, synthetic_sentences, train_args  # noqa: E402

from fairseq_clear.fairseq_fixes.heartbeat_timeout import HEARTBEAT_KILL_GRACE_S  # noqa: E402
from harness.runs import run_until, torchrun_workers  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def case(data, work, sig, heartbeat, limit):
    extra = ["--distributed-backend", "gloo"]
    if heartbeat > 0:
        extra += ["--heartbeat-timeout", str(heartbeat)]
    args = [bin_path("torchrun"), "--nproc_per_node", "2", "--master_port", str(free_port()),
            *train_args(data, tempfile.mkdtemp(dir=work), *extra, max_update=100000, batch_size=8)]
    state = {}

    def stop(line):
        if "at" not in state and '"num_updates": "3"' in line and "| train_inner |" in line:
            workers = torchrun_workers(state["proc"].pid)
            os.kill(workers[1], sig)
            state["at"] = time.monotonic()
        return False

    try:
        out, rc, _ = run_until(args, stop, timeout=limit, on_start=lambda p: state.update(proc=p))
        return out, rc, time.monotonic() - state["at"]
    except TimeoutError as e:
        return str(e), None, time.monotonic() - state.get("at", time.monotonic())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heartbeat-timeout", type=int, default=5)
    p.add_argument("--mode", choices=("stop", "kill", "both"), default="both")
    p.add_argument("--control", action="store_true")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="clear-hung-")
    data = make_binarized(Path(work) / "data", synthetic_sentences(600, 0), synthetic_sentences(60, 1))
    ok = True
    if args.mode in ("kill", "both"):
        out, rc, took = case(data, work, signal.SIGKILL, -1, 300)
        good = rc not in (0, None) and took < 60 and "Signal 9 (SIGKILL)" in out
        how = "the survivor's collective failed first" if "Connection closed by peer" in out \
            else "torchrun stopped the survivor first"
        print(f"[kill] rank 1 SIGKILLed: job exited rc={rc} after {took:.1f} s, "
              f"{how}; {'as expected' if good else 'UNEXPECTED'}")
        ok &= good
    if args.mode in ("stop", "both"):
        h = args.heartbeat_timeout
        bound = h + HEARTBEAT_KILL_GRACE_S + 30 + 30
        out, rc, took = case(data, work, signal.SIGSTOP, h, 300)
        good = (rc not in (0, None) and took < bound and "Killing job for not making progress" in out
                and "still blocked" in out)
        print(f"[stop] rank 1 SIGSTOPped, --heartbeat-timeout {h}: job exited rc={rc} after "
              f"{took:.1f} s (bound {bound:.0f} s) {'as expected' if good else 'UNEXPECTED'}")
        ok &= good
    if args.control:
        out, rc, took = case(data, work, signal.SIGSTOP, -1, 90)
        good = rc is None
        print(f"[control] no --heartbeat-timeout: {'still hanging after' if good else 'ended after'} "
              f"{took:.0f} s (gloo's own timeout is 30 min)")
        ok &= good
    print("HUNG/DEAD RANK HANDLED" if ok else "UNEXPECTED BEHAVIOUR")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
