"""``--heartbeat-timeout`` also ends a job whose peer hangs inside a collective.

fairseq's watchdog sends SIGINT to its own process after N seconds without a forward pass.
A rank that waits for a hung peer is blocked inside a gloo/NCCL collective, where Python
cannot act on SIGINT until the collective returns (gloo's default timeout: 30 minutes), so
the job hangs on. Here the process is killed when, ``HEARTBEAT_KILL_GRACE_S`` seconds after
that SIGINT, Python has still not run its SIGINT handler (the main thread never got back to
Python code): torchrun then sees a failed worker and stops the job. When the interrupt was
handled (a caught KeyboardInterrupt, an exiting process), nothing more happens, as in
fairseq. To know, the wrapper, built in the main thread, puts a handler in front of the
SIGINT handler that notes the delivery and calls the one before it; it is put back when the
watchdog stops. Only for the models of a fairseq-clear run (scope.py).
"""

import logging
import os
import signal as _signal
import threading
import time

from . import _patching, scope

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"
#: seconds between fairseq's SIGINT and the SIGKILL that follows it if the process is still blocked
HEARTBEAT_KILL_GRACE_S = 10.0
_POLL_S = 0.05


class DeliveryWatch:
    """Notes when Python runs the handler of ``signum``; the handler before it still runs."""

    def __init__(self, signum):
        self.signum, self.delivered = signum, threading.Event()
        self.previous = _signal.getsignal(signum)
        _signal.signal(signum, self._handle)  # raises ValueError outside the main thread

    def _handle(self, signum, frame):
        self.delivered.set()
        if callable(self.previous):
            return self.previous(signum, frame)
        if self.previous == _signal.SIG_DFL:  # the default action (for SIGINT: Python's own)
            _signal.signal(signum, _signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def close(self):
        if (self.previous is not None and threading.current_thread() is threading.main_thread()
                and _signal.getsignal(self.signum) == self._handle):
            _signal.signal(self.signum, self.previous)


def wait_for_delivery(watch, stopped, grace_s: float) -> bool:
    """True when the signal was handled (or the watchdog stopped) within ``grace_s`` seconds."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if watch.delivered.is_set() or stopped():
            return True
        time.sleep(_POLL_S)
    return watch.delivered.is_set() or stopped()


def install():
    from fairseq.models import distributed_fairseq_model as dfm

    def make(base):
        class DistributedTimeoutWrapper(base):
            def __init__(self, module, timeout, signal=_signal.SIGINT):
                watch = None
                if timeout > 0 and scope.active():
                    try:
                        watch = DeliveryWatch(signal)
                    except ValueError:  # not the main thread: fairseq's watchdog as it is
                        logger.debug("heartbeat watchdog built outside the main thread: no escalation")
                # before fairseq's __init__, which starts the watchdog thread
                object.__setattr__(self, "_clear_watch", watch)
                super().__init__(module, timeout, signal)

            def stop_timeout(self):
                super().stop_timeout()
                watch = self.__dict__.get("_clear_watch")
                if watch is not None:
                    watch.close()

            def _check_heartbeat(self, parent_pid):
                watch = self.__dict__.get("_clear_watch")
                if watch is not None:
                    watch.delivered.clear()
                super()._check_heartbeat(parent_pid)  # returns after its SIGINT, or when stopped
                if watch is None or self._terminated:
                    return
                if wait_for_delivery(watch, lambda: self._terminated, HEARTBEAT_KILL_GRACE_S):
                    return
                logger.error(
                    "still blocked %.0f s after the heartbeat timeout's SIGINT (a peer is probably "
                    "hung inside a collective); killing this process", HEARTBEAT_KILL_GRACE_S,
                )
                logging.shutdown()
                os.kill(parent_pid, _signal.SIGKILL)

        DistributedTimeoutWrapper.__qualname__ = base.__qualname__
        DistributedTimeoutWrapper.__module__ = base.__module__
        return DistributedTimeoutWrapper

    # the name fairseq's DistributedFairseqModel builds the watchdog from
    _patching.replace(dfm, "DistributedTimeoutWrapper", make)
