"""Resuming on several ranks: rank 0's checkpoint reaches the others as plain data.

fairseq's ``Trainer.load_checkpoint`` reads the checkpoint on rank 0 only (unless
``--load-checkpoint-on-all-dp-ranks``) and sends it to the other ranks with
``distributed_utils.broadcast_object``: the tensors apart, the rest pickled by ``torch.save`` and
unpickled on each receiver by a ``torch.load`` without arguments. On torch >= 2.6 that load is
``weights_only=True``, and it refuses two things rank 0 sends: the ``DictConfig`` that
``load_checkpoint_to_cpu`` made of the checkpoint's config, and the placeholders
(``_TensorPlaceholder``) fairseq puts where the tensors were. So every run on more than one rank
failed to resume from its own checkpoint (rank 1: "Weights only load failed ... DictConfig").

In a fairseq-clear run (scope.py) the sender turns each ``DictConfig`` at the top of what it sends
into plain containers (what the checkpoint file holds), the receivers unpickle with
``weights_only=True`` forced, the plugin's allow-list and fairseq's placeholder class (a frozen
dataclass holding one int), and rebuild the ``DictConfig`` as ``load_checkpoint_to_cpu`` does.
The sender keeps what it had. Outside the scope ``broadcast_object`` is fairseq's own.
"""

import functools

from . import _patching, scope

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"
#: what the plugin's runs would lose without it
REQUIRED = "resuming a run on more than one rank"

#: key of the sent dict naming its entries that were DictConfigs
_CONFIG_KEYS = "__fairseq_clear_dictconfig_keys__"


def plain(obj):
    """``obj`` to send: a dict whose ``DictConfig`` values are plain containers (a copy), the names
    of those entries under :data:`_CONFIG_KEYS`; anything else as it is."""
    from omegaconf import DictConfig, OmegaConf

    if not isinstance(obj, dict):
        return obj
    keys = [k for k, v in obj.items() if isinstance(v, DictConfig)]
    if not keys:
        return obj
    sent = dict(obj)
    for k in keys:
        sent[k] = OmegaConf.to_container(obj[k], resolve=False)
    sent[_CONFIG_KEYS] = keys
    return sent


def rebuilt(obj):
    """What a receiver got, with the entries :func:`plain` turned into containers made
    ``DictConfig`` again, as fairseq's ``load_checkpoint_to_cpu`` makes them."""
    from omegaconf import OmegaConf

    if not isinstance(obj, dict) or _CONFIG_KEYS not in obj:
        return obj
    keys = obj.pop(_CONFIG_KEYS)
    for k in keys:
        obj[k] = OmegaConf.create(obj[k], flags={"allow_objects": True})
    return obj


def install():
    import torch
    from fairseq.distributed import utils as distributed_utils

    from ..allowlist import allow_fairseq_checkpoints
    from ..checkpoint_safety import _forced_weights_only

    def make_broadcast_object(fairseq_broadcast_object):
        @functools.wraps(fairseq_broadcast_object)
        def broadcast_object(obj, src_rank, group, dist_device=None):
            if not scope.active():
                return fairseq_broadcast_object(obj, src_rank, group, dist_device)
            if distributed_utils.get_rank(group) == src_rank:
                fairseq_broadcast_object(plain(obj), src_rank, group, dist_device)
                return obj
            allow_fairseq_checkpoints()
            with _forced_weights_only(), torch.serialization.safe_globals([distributed_utils._TensorPlaceholder]):
                received = fairseq_broadcast_object(None, src_rank, group, dist_device)
            return rebuilt(received)

        return broadcast_object

    _patching.replace(distributed_utils, "broadcast_object", make_broadcast_object)
