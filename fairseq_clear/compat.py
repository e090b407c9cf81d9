"""Small fixes to fairseq 0.12 under current torch, applied when the plugin is imported.

* fairseq's ``NanDetector`` (run after "gradients are Nan/Inf" to name the module
  that produced them) registers old-style ``register_backward_hook`` hooks on every
  module. Current torch cannot attach those to a module whose output is a dict
  holding no tensor directly (fairseq's ``TransformerEncoder`` returns lists), so the
  post-mortem itself dies with ``StopIteration`` and the NaN report never appears.
  Full backward hooks (same signature) skip such outputs instead.
* CPU torchrun, CPU DDP and the heartbeat timeout: see each function.
* fairseq's batch-prefetch threads can abort a finished run at exit (SIGABRT): they are
  stopped first, for every task (``patch_prefetch_threads``).
"""

import logging

logger = logging.getLogger(__name__)


def patch_nan_detector():
    from fairseq import nan_detector

    cls = nan_detector.NanDetector
    if getattr(cls, "_clear_full_hooks", False):
        return

    def add_hooks(self, module):
        if self.forward:
            self.fhooks.append(module.register_forward_hook(self.fhook_fn))
        if self.backward:
            self.bhooks.append(module.register_full_backward_hook(self.bhook_fn))

    cls.add_hooks = add_hooks
    cls._clear_full_hooks = True


def patch_cpu_torchrun():
    """Make ``torchrun ... fairseq-train --cpu`` train one model across the workers.

    fairseq's default ``--distributed-world-size`` is the number of GPUs (at least 1),
    and it reads torchrun's ``WORLD_SIZE`` only when that default is above 1: without
    CUDA every torchrun worker silently trains alone on all the data, writing the same
    checkpoint files; with ``--distributed-world-size N`` it divides by the number of
    GPUs (ZeroDivisionError). Without CUDA, torchrun's environment is read here.
    """
    import os

    import torch
    from fairseq.distributed import utils as dist_utils

    original = dist_utils.infer_init_method
    if getattr(original, "_clear_cpu_torchrun", False):
        return

    def infer_init_method(cfg, force_distributed=False):
        launched = all(k in os.environ for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"))
        if (
            launched
            and int(os.environ["WORLD_SIZE"]) > 1
            and cfg.distributed_init_method is None
            and not cfg.tpu
            and not cfg.pipeline_model_parallel
            and torch.cuda.device_count() == 0
        ):
            if cfg.distributed_backend == "nccl":
                raise ValueError(
                    "--distributed-backend nccl needs CUDA GPUs; on CPU pass "
                    "--distributed-backend gloo"
                )
            cfg.distributed_init_method = "env://"
            cfg.distributed_world_size = int(os.environ["WORLD_SIZE"])
            cfg.distributed_rank = int(os.environ["RANK"])
            cfg.device_id = 0
            cfg.distributed_no_spawn = True
            return
        return original(cfg, force_distributed)

    infer_init_method._clear_cpu_torchrun = True
    dist_utils.infer_init_method = infer_init_method


def patch_cpu_ddp():
    """``--ddp-backend pytorch_ddp`` (fairseq's default) on CPU.

    fairseq always passes ``device_ids=[device_id]`` to torch's DistributedDataParallel,
    which torch refuses for a CPU module; CPU modules take ``device_ids=None``.
    """
    from fairseq.models import distributed_fairseq_model as dfm

    base = dfm.DistributedDataParallel
    if getattr(base, "_clear_cpu_ok", False):
        return

    class DistributedDataParallel(base):
        _clear_cpu_ok = True

        def __init__(self, module, device_ids=None, output_device=None, *args, **kwargs):
            if all(p.device.type == "cpu" for p in module.parameters()):
                device_ids = output_device = None
            super().__init__(module, device_ids, output_device, *args, **kwargs)

    dfm.DistributedDataParallel = DistributedDataParallel


#: seconds between fairseq's SIGINT and the SIGKILL that follows it (see below)
HEARTBEAT_KILL_GRACE_S = 10.0


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


def patch_prefetch_threads():
    """Every task's batch iterators (sentence_prediction fine-tuning included, when the
    plugin is loaded) stop their prefetch thread at exit: see data/prefetch_threads.py."""
    from fairseq.tasks.fairseq_task import FairseqTask

    from .data import prefetch_threads

    original = FairseqTask.get_batch_iterator
    if getattr(original, "_clear_tracked", False):
        return

    def get_batch_iterator(self, *args, **kwargs):
        return prefetch_threads.track(original(self, *args, **kwargs))

    get_batch_iterator._clear_tracked = True
    FairseqTask.get_batch_iterator = get_batch_iterator

