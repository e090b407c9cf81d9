"""ESimCSE's momentum contrast (Wu et al. 2022, §3.2; MoCo, He et al. 2020): a momentum encoder
(an exponential moving average of the model) and a FIFO queue of its vectors of past batches'
positives, used as extra negatives (``--queue-size``, ``--queue-momentum``).

The criterion holds one :class:`MomentumQueue`. Once per update, before the views are encoded,
:meth:`step` moves the momentum encoder towards the model (θ_m ← m·θ_m + (1 − m)·θ; at the first
update it is a copy of the model); after the update's loss, the momentum encoder's vectors of the
problem's positives (all ranks', gathered) and their pairs' duplicate keys are appended, the oldest
dropped. The momentum encoder runs in eval mode under ``no_grad`` (no dropout, no random draw:
a resume stays bit-exact), so the queue is a constant of the loss. Both are part of the criterion's
state (:meth:`state` / :meth:`restore`), which fairseq saves in every checkpoint.

Against ESimCSE's code (caskcsg/sentemb, ESimCSE/esimcse/trainers.py at commit 9ab271bb3f14 and
esimcse/models.py at fc7ca0dd89c5), which also encodes the queue in eval mode (no dropout): it queues the
first view (the sentence itself; with word repetition in the positive only, the unrepeated one) where
this queues the positives (the pairs' second rows: a labelled pair's positive, the repeated view), every
rank keeps only its own vectors where this gathers all ranks', its queue is emptied at each epoch where
this one runs on (and resumes), and its momentum encoder moves at every micro-batch where this one moves
once per update.
"""

import copy
from typing import Optional

import torch

from .gradcache import encode_frozen

#: MASTERS_NOTE: under --fp16/--bf16 the model, so its copy, holds fp16/bf16 weights, in which the
#: momentum's step (1 - m)·(θ - θ_m) is mostly below half a unit in the last place and would be
#: rounded away (bf16, m = 0.995: the average moved a tenth of the way); the average is kept in fp32,
#: as fairseq's own EMA does (``ema_fp32``), and the encoder's weights are its rounding. Checkpoints
#: hold the fp32 average, so a resume continues it exactly.
LOW_PRECISION = (torch.float16, torch.bfloat16)


def _at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    # fp16/bf16 vectors are queued in fp32 (as the loss compares them); a float64 model's stay float64
    return x.to(torch.promote_types(x.dtype, torch.float32))


class MomentumQueue:
    """The momentum encoder and the queue (``vectors`` (Q', d), ``keys`` (Q', k), newest last; with
    --distill-weight, ``teacher``: the guide's vectors of the same rows)."""

    def __init__(self, size: int, momentum: float):
        self.size, self.momentum = size, momentum
        self.encoder = None  # the model's copy, made at the first update (or restored)
        self.vectors: Optional[torch.Tensor] = None
        self.keys: Optional[torch.Tensor] = None
        self.teacher: Optional[torch.Tensor] = None
        self._restored_encoder = None
        self._masters = {}  # the encoder's fp16/bf16 weight (its data_ptr) -> the fp32 average it rounds

    @torch.no_grad()
    def step(self, model):
        """Once per update, before encoding: copy the model the first time, else move towards it."""
        while hasattr(model, "module"):  # fairseq's distributed wrappers
            model = model.module
        if self.encoder is None:
            self.encoder = copy.deepcopy(model).eval()
            for p in self.encoder.parameters():
                p.requires_grad_(False)
            restored, self._restored_encoder = self._restored_encoder, None
            if restored is not None:  # a resumed run: the saved average, moved as the uninterrupted run moves it now
                self.encoder.load_state_dict(restored)
            self._masters = {}
            for name, p in self.encoder.named_parameters():
                if p.dtype in LOW_PRECISION:  # the average is kept in fp32: see MASTERS_NOTE
                    saved = None if restored is None else restored.get(name)
                    self._masters[p.data_ptr()] = (p.detach().float() if saved is None
                                                   else saved.detach().to(p.device, torch.float32, copy=True))
            if restored is None:
                return
        for ema, live in zip(self.encoder.parameters(), model.parameters()):
            master = self._masters.get(ema.data_ptr(), ema)
            master.mul_(self.momentum).add_(live.detach().to(master.dtype), alpha=1.0 - self.momentum)
            if master is not ema:
                ema.copy_(master)

    @torch.no_grad()
    def encode(self, src_tokens, chunk_size: int = 0):
        """The momentum encoder's vectors of ``src_tokens``, ``chunk_size`` rows at a time (0: at once)."""
        return _at_least_fp32(encode_frozen(lambda src: self.encoder(src, contrastive=True)[0], src_tokens,
                                            chunk_size))

    @torch.no_grad()
    def push(self, vectors: torch.Tensor, keys: Optional[torch.Tensor], teacher: Optional[torch.Tensor] = None):
        """Append the newest vectors (and their pairs' keys, the guide's vectors), keeping the last ``size``."""
        self.to(vectors.device)  # a restored queue comes from the checkpoint on the CPU
        for name, new in (("vectors", _at_least_fp32(vectors.detach())), ("keys", keys),
                          ("teacher", None if teacher is None else _at_least_fp32(teacher.detach()))):
            if new is not None:
                old = getattr(self, name)
                setattr(self, name, (new if old is None else torch.cat([old, new]))[-self.size:])

    def teacher_columns(self):
        """(the queued vectors, the guide's vectors of them) when every queued row has both, else None."""
        if self.teacher is None or self.vectors is None or self.teacher.size(0) != self.vectors.size(0):
            return None
        return self.vectors, self.teacher

    def state(self, prefix: str) -> dict:
        out = {}
        if self.vectors is not None:
            out[prefix + "vectors"] = self.vectors
        if self.keys is not None:
            out[prefix + "keys"] = self.keys
        if self.teacher is not None:
            out[prefix + "teacher"] = self.teacher
        if self.encoder is not None:  # the fp32 average where the encoder's weights are its rounding
            encoder = {name: self._masters.get(value.data_ptr(), value)
                       for name, value in self.encoder.state_dict().items()}
        else:
            encoder = self._restored_encoder
        for name, value in (encoder or {}).items():
            out[prefix + "encoder." + name] = value
        return out

    def restore(self, state: dict, prefix: str) -> dict:
        """Take this queue's entries out of a criterion state (a checkpoint's); returns the rest."""
        rest, encoder = {}, {}
        self.vectors = self.keys = self.teacher = None
        for name, value in state.items():
            if not name.startswith(prefix):
                rest[name] = value
            elif name[len(prefix):] in ("vectors", "keys", "teacher"):
                # the newest --queue-size of them: a run resumed with a smaller queue uses it from its first update
                setattr(self, name[len(prefix):], None if value is None else value[-self.size:])
            else:
                encoder[name[len(prefix + "encoder."):]] = value
        if encoder:  # loaded into a copy of the model at the next update (its fp32 average kept)
            self.encoder, self._masters, self._restored_encoder = None, {}, encoder
        return rest

    def to(self, device):
        for name in ("vectors", "keys", "teacher"):
            if getattr(self, name) is not None:
                setattr(self, name, getattr(self, name).to(device))
        return self
