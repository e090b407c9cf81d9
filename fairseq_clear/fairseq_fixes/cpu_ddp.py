"""``--ddp-backend pytorch_ddp`` (fairseq's default) on CPU: fairseq passes ``device_ids`` that torch refuses for CPU modules."""

from ._version import check_version

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


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


def apply():
    check_version(__name__, WRITTEN_FOR)
    patch_cpu_ddp()
