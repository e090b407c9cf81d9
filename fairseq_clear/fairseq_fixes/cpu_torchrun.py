"""``torchrun ... fairseq-train --cpu`` trains one model across the workers.

fairseq's default ``--distributed-world-size`` is the number of GPUs (at least 1), and it
reads torchrun's ``WORLD_SIZE`` only when that default is above 1: without CUDA every
torchrun worker silently trains alone on all the data, writing the same checkpoint files;
with ``--distributed-world-size N`` it divides by the number of GPUs (ZeroDivisionError).
For a fairseq-clear run without CUDA, run.py reads torchrun's environment here before
fairseq's ``call_main`` would guess.
"""

import os

from ..errors import FairseqClearError

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def init_from_torchrun(cfg) -> bool:
    """Point ``cfg`` (the distributed_training section) at torchrun's workers when launched by
    torchrun on a machine without CUDA; True when it did."""
    import torch

    launched = all(k in os.environ for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"))
    if not (
        launched
        and int(os.environ["WORLD_SIZE"]) > 1
        and cfg.distributed_init_method is None
        and not cfg.tpu
        and not cfg.pipeline_model_parallel
        and torch.cuda.device_count() == 0
    ):
        return False
    if cfg.distributed_backend == "nccl":
        raise ValueError("--distributed-backend nccl needs CUDA GPUs; on CPU pass --distributed-backend gloo")
    cfg.distributed_init_method = "env://"
    cfg.distributed_world_size = int(os.environ["WORLD_SIZE"])
    cfg.distributed_rank = int(os.environ["RANK"])
    cfg.device_id = 0
    cfg.distributed_no_spawn = True
    return True


def refuse_workers_alone() -> None:
    """A run whose scope opened after fairseq's ``call_main`` (fairseq-hydra-train: scope.py) cannot
    form torchrun's group any more; without CUDA each worker would train alone on all the data,
    writing the same files: refused, naming what works."""
    import torch

    launched = all(k in os.environ for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"))
    if (launched and int(os.environ["WORLD_SIZE"]) > 1 and torch.cuda.device_count() == 0
            and not torch.distributed.is_initialized()):
        raise CpuTorchrunError(
            "torchrun without GPUs under fairseq-hydra-train: fairseq started this run before it imported "
            "the plugin, which forms one group of CPU workers only before fairseq's call_main, so each of "
            f"the {os.environ['WORLD_SIZE']} workers would train alone; run the same options with "
            "fairseq-train (the plugin forms the group there), or on GPUs")


class CpuTorchrunError(FairseqClearError, RuntimeError):
    """torchrun's CPU workers cannot form one group in this run."""
