"""``--ddp-backend pytorch_ddp`` (fairseq's default) trains on CPU ranks.

fairseq always passes ``device_ids=[device_id]`` to torch's DistributedDataParallel, which
torch refuses for a CPU module (CPU modules take ``device_ids=None``), so ``torchrun ...
fairseq-train --cpu --distributed-backend gloo`` fails unless ``--ddp-backend legacy_ddp``.
Only for the models of a fairseq-clear run (scope.py).
"""

from . import _patching, scope

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def install():
    from fairseq.models import distributed_fairseq_model as dfm

    def make(base):
        class DistributedDataParallel(base):
            def __init__(self, module, device_ids=None, output_device=None, *args, **kwargs):
                if scope.active() and all(p.device.type == "cpu" for p in module.parameters()):
                    device_ids = output_device = None
                super().__init__(module, device_ids, output_device, *args, **kwargs)

        DistributedDataParallel.__qualname__ = base.__qualname__
        return DistributedDataParallel

    # the name fairseq's DistributedFairseqModel wraps the model with
    _patching.replace(dfm, "DistributedDataParallel", make)
