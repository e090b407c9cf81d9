"""``torchrun ... fairseq-train --cpu`` trains one model across the workers."""

import os

from ._version import check_version

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def patch_cpu_torchrun():
    """Make ``torchrun ... fairseq-train --cpu`` train one model across the workers.

    fairseq's default ``--distributed-world-size`` is the number of GPUs (at least 1),
    and it reads torchrun's ``WORLD_SIZE`` only when that default is above 1: without
    CUDA every torchrun worker silently trains alone on all the data, writing the same
    checkpoint files; with ``--distributed-world-size N`` it divides by the number of
    GPUs (ZeroDivisionError). Without CUDA, torchrun's environment is read here.
    """
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


def apply():
    check_version(__name__, WRITTEN_FOR)
    patch_cpu_torchrun()
