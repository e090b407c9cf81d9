"""Crafted checkpoints, as an attacker would ship them: a real checkpoint with a pickle gadget."""

import argparse
import builtins
import os
from pathlib import Path


class _Payload:
    """Unpickling this calls ``fn(*args)``: the classic pickle code-execution gadget."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def payloads(marker: Path):
    return {
        "os.system": _Payload(os.system, f"touch {marker}"),
        "builtins.exec": _Payload(builtins.exec, f"open({str(marker)!r}, 'w').write('ran')"),
        "builtins.open": _Payload(builtins.open, str(marker), "w"),
    }


def evil_checkpoint(trained_path, out: Path, marker: Path, payload="os.system", where="args",
                    legacy=False):
    """A real checkpoint with a payload injected (in its args, a weight or its train iterator)."""
    import torch

    from fairseq_clear.checkpoint_safety import safe_load

    state = safe_load(trained_path)
    gadget = payloads(marker)[payload]
    if where == "args":
        state["args"] = argparse.Namespace(arch="clear_roberta_tiny", hook=gadget)
    elif where == "model":
        state["model"]["encoder.sentence_encoder.layernorm_embedding.weight"] = gadget
    else:
        state["extra_state"]["train_iterator"] = gadget
    torch.save(state, out, _use_new_zipfile_serialization=not legacy)
    return out
