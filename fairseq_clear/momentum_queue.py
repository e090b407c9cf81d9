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
"""

import copy
from typing import Optional

import torch


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

    @torch.no_grad()
    def step(self, model):
        """Once per update, before encoding: copy the model the first time, else move towards it."""
        while hasattr(model, "module"):  # fairseq's distributed wrappers
            model = model.module
        if self.encoder is None:
            self.encoder = copy.deepcopy(model).eval()
            for p in self.encoder.parameters():
                p.requires_grad_(False)
            if self._restored_encoder is None:
                return
            # a resumed run: the saved average, moved as the uninterrupted run moves it now
            self.encoder.load_state_dict(self._restored_encoder)
            self._restored_encoder = None
        for ema, live in zip(self.encoder.parameters(), model.parameters()):
            ema.mul_(self.momentum).add_(live.detach().to(ema.dtype), alpha=1.0 - self.momentum)

    @torch.no_grad()
    def encode(self, src_tokens):
        return self.encoder(src_tokens, contrastive=True)[0].float()

    @torch.no_grad()
    def push(self, vectors: torch.Tensor, keys: Optional[torch.Tensor], teacher: Optional[torch.Tensor] = None):
        """Append the newest vectors (and their pairs' keys, the guide's vectors), keeping the last ``size``."""
        self.to(vectors.device)  # a restored queue comes from the checkpoint on the CPU
        for name, new in (("vectors", vectors.detach().float()), ("keys", keys),
                          ("teacher", None if teacher is None else teacher.detach().float())):
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
        encoder = self.encoder.state_dict() if self.encoder is not None else self._restored_encoder
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
                setattr(self, name[len(prefix):], value)
            else:
                encoder[name[len(prefix + "encoder."):]] = value
        if encoder:
            if self.encoder is not None:
                self.encoder.load_state_dict(encoder)
            else:  # loaded into the model's copy at the first update
                self._restored_encoder = encoder
        return rest

    def to(self, device):
        for name in ("vectors", "keys", "teacher"):
            if getattr(self, name) is not None:
                setattr(self, name, getattr(self, name).to(device))
        return self
