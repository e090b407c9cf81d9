"""Resume with --fp16/--bf16 continues from the fp32 master weights, not from their rounding.

fairseq's FP16Optimizer keeps fp32 master copies of the half/bf16 parameters, but its
``state_dict`` holds only the inner optimizer's state and the loss scale: a resumed run
rebuilds the masters from the rounded model weights (and restarts the loss scaler's
growth window), so it drifts from the run it continues. The masters (one tensor per
parameter, whether the buffer is flat or not) and the scaler's counters are saved with
the optimizer state and restored when they fit; a checkpoint without them loads as before.
Only in a fairseq-clear run (scope.py): other runs keep fairseq's optimizer state.
"""

import logging

import torch

from . import _patching, scope

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"

MASTERS, SCALER = "fp32_master_params", "loss_scaler_counters"
SCALER_FIELDS = ("_iter", "_last_overflow_iter", "_last_rescale_iter", "_overflows_since_rescale")


def _masters(optimizer):
    """The fp32 master weights as one tensor per fp16/bf16 parameter (views, not copies), or
    None where fairseq splits them over several devices (pipeline parallelism)."""
    params = list(optimizer.fp16_params)
    if not optimizer.has_flat_params:
        return list(optimizer.fp32_params)
    if len(optimizer.fp32_params) != 1:
        return None
    flat = next(iter(optimizer.fp32_params.values())).data
    pieces = torch.split(flat, [p.numel() for p in params])
    return [piece.view_as(p) for piece, p in zip(pieces, params)]


def _usable_counters(counters):
    """The scaler's counters if they are what a run writes (ints, the iteration after the last
    rescale and overflow), else None: the file is not trusted to be well formed."""
    if not isinstance(counters, dict) or set(counters) != set(SCALER_FIELDS):
        return None
    if not all(type(counters[k]) is int for k in SCALER_FIELDS):
        return None
    c = counters
    if not (c["_iter"] > c["_last_rescale_iter"] >= -1 and c["_iter"] > c["_last_overflow_iter"] >= -1
            and c["_overflows_since_rescale"] >= 0):
        return None
    return c


def _usable_masters(saved, masters):
    """The saved masters if they fit ``masters`` one to one (float tensors of the same shapes,
    finite), else None."""
    if masters is None or not isinstance(saved, (list, tuple)) or len(saved) != len(masters):
        return None
    for value, master in zip(saved, masters):
        if not (torch.is_tensor(value) and value.layout == torch.strided and value.is_floating_point()
                and value.device.type != "meta" and value.shape == master.shape
                and bool(torch.isfinite(value).all())):
            return None
    return saved


def install():
    from fairseq.optim.fp16_optimizer import _FP16OptimizerMixin

    def make_state_dict(fairseq_state_dict):
        def state_dict(self):
            state = fairseq_state_dict(self)
            if not scope.active():
                return state
            masters = _masters(self)
            if masters is not None:  # straight to the CPU: no second copy on the device
                state[MASTERS] = [m.detach().to("cpu", copy=True) for m in masters]
            if self.scaler is not None:
                state[SCALER] = {k: getattr(self.scaler, k) for k in SCALER_FIELDS}
            return state

        return state_dict

    def make_load_state_dict(fairseq_load_state_dict):
        def load_state_dict(self, state_dict, optimizer_overrides=None):
            if not scope.active():
                return fairseq_load_state_dict(self, state_dict, optimizer_overrides)
            state_dict = dict(state_dict)
            saved, counters = state_dict.pop(MASTERS, None), state_dict.pop(SCALER, None)
            masters = _masters(self)
            usable_masters, usable_counters = _usable_masters(saved, masters), _usable_counters(counters)
            if saved is not None and usable_masters is None:
                logger.warning("the checkpoint's fp32 master weights do not fit this model's parameters "
                               "(number, shapes, float and finite values); they are rebuilt from the "
                               "model's weights, as fairseq does")
            if counters is not None and usable_counters is None and self.scaler is not None:
                logger.warning("the checkpoint's loss-scaler counters are malformed; the scaler's growth "
                               "window restarts, as fairseq does")
            fairseq_load_state_dict(self, state_dict, optimizer_overrides)
            if usable_counters is not None and self.scaler is not None:
                for k in SCALER_FIELDS:
                    setattr(self.scaler, k, usable_counters[k])
            if usable_masters is not None:
                with torch.no_grad():
                    for master, value in zip(masters, usable_masters):
                        master.copy_(value)

        return load_state_dict

    _patching.replace(_FP16OptimizerMixin, "state_dict", make_state_dict)
    _patching.replace(_FP16OptimizerMixin, "load_state_dict", make_load_state_dict)
