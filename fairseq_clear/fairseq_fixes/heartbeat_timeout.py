"""``--heartbeat-timeout`` ends a job whose peer hangs inside a collective."""

import logging

from ._version import check_version

logger = logging.getLogger(__name__)

#: seconds between fairseq's SIGINT and the SIGKILL that follows it
HEARTBEAT_KILL_GRACE_S = 10.0

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def patch_heartbeat_timeout():
    """Make ``--heartbeat-timeout`` end a job whose peer hangs.

    fairseq's watchdog sends SIGINT to its own process after N seconds without a
    forward pass. A rank that waits for a hung peer is blocked inside a gloo/NCCL
    collective, where Python cannot act on SIGINT until the collective returns
    (gloo's default timeout: 30 minutes). If the process is still there
    ``HEARTBEAT_KILL_GRACE_S`` seconds after the SIGINT, it is killed, so that
    torchrun sees a failed worker and stops the job.
    """
    import os
    import signal
    import time

    from fairseq.models import distributed_fairseq_model as dfm

    base = dfm.DistributedTimeoutWrapper
    if getattr(base, "_clear_escalates", False):
        return

    class DistributedTimeoutWrapper(base):
        _clear_escalates = True

        def _check_heartbeat(self, parent_pid):
            super()._check_heartbeat(parent_pid)  # returns after its SIGINT, or when stopped
            if self._terminated:
                return
            time.sleep(HEARTBEAT_KILL_GRACE_S)
            logger.error(
                "still blocked %.0f s after the heartbeat timeout's SIGINT (a peer is probably "
                "hung inside a collective); killing this process", HEARTBEAT_KILL_GRACE_S,
            )
            logging.shutdown()
            os.kill(parent_pid, signal.SIGKILL)

    dfm.DistributedTimeoutWrapper = DistributedTimeoutWrapper


def apply():
    check_version(__name__, WRITTEN_FOR)
    patch_heartbeat_timeout()
