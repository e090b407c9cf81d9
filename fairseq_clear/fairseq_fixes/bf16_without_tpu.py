"""``fairseq-train --bf16`` trains in bfloat16 on the GPU or CPU, as ``fairseq-hydra-train`` does.

fairseq 0.12's command line makes ``--bf16`` imply ``--tpu`` (``options.parse_args_and_arch``),
so without torch_xla every ``--bf16`` run fails importing it, although fairseq's trainer and
FP16Optimizer support bfloat16 on CUDA and CPU (hydra configs reach them, since they never
set ``tpu``). When torch_xla is not installed and ``--tpu`` was not on the command line, the
implied ``--tpu`` is taken back before a fairseq-clear run starts (run.py); an explicit
``--tpu`` (or hydra's ``common.tpu=``) is left alone. Code that parses fairseq's arguments
itself and calls ``call_main`` with ``--tpu`` in its own list (not ``sys.argv``) gets bf16
without TPU. Other runs keep fairseq's meaning of --bf16.
"""

import argparse
import importlib.util
import logging
import sys

import torch
from omegaconf import DictConfig

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def untie(cfg, argv=None) -> bool:
    """Take back the ``tpu`` that ``--bf16`` implied; True when it did."""
    common = cfg.common
    argv = sys.argv if argv is None else argv
    # explicit: fairseq-train's --tpu (its parser takes no abbreviations) or a hydra override
    if not (common.bf16 and common.tpu) or any(a == "--tpu" or a.lstrip("+").startswith("common.tpu=")
                                                for a in argv):
        return False
    if importlib.util.find_spec("torch_xla") is not None:
        return False  # a TPU host: --bf16 keeps fairseq's meaning there
    # the command line's namespace copied tpu into every section that interpolates it
    for name in list(cfg.keys()):
        section = cfg[name]
        if isinstance(section, argparse.Namespace):
            if getattr(section, "tpu", False):
                section.tpu = False
        elif isinstance(section, DictConfig) and section.get("tpu", False):
            section.tpu = False
    logger.info("--bf16 without torch_xla: bfloat16 on %s (fairseq-train's --bf16 implies --tpu)",
                "the GPU" if torch.cuda.is_available() and not common.cpu else "the CPU")
    return True
