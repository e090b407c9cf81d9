"""Gradient-cached encoding of the contrastive views (GradCache, Gao et al. 2021).

The views of a batch are encoded in chunks of K rows *without* keeping activations;
the contrastive loss is computed on the full set of vectors (gathered across ranks
as usual); in the backward pass each chunk is encoded again, this time with its
graph, and receives its slice of the loss's gradient with respect to the vectors.
Peak activation memory is that of K rows instead of the whole batch, so the
candidate set of NT-Xent no longer depends on what fits on a device.

It is one autograd Function around the model call, so fairseq's trainer is used as
it is: ``optimizer.backward(loss)`` (fp16/amp loss scaling reaches the cached
gradients, since they are the incoming gradients of the scaled loss), gradient
clipping, accumulation over ``--update-freq``. Dropout gets the same masks in both
passes: the RNG state before each chunk is saved and restored for its re-encoding
(CPU and CUDA), and the RNG is left as it was after the backward, so resumes stay
bit-exact. The gradient therefore equals that of encoding the same chunks with
their graphs kept (and, without dropout, that of encoding the whole batch at once).

With more than one rank, the re-encoding backward runs inside the outer backward,
which torch's DistributedDataParallel does not allow (a parameter becomes ready
several times): use ``--ddp-backend legacy_ddp`` (gradients all-reduced once, after
the backward).
"""

import torch


def _rng_state(device):
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state, device):
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


class _CachedEncode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, encode, src_tokens, chunk_size, anchor):
        chunks = list(torch.split(src_tokens, chunk_size))
        states, outs = [], []
        with torch.no_grad():
            for chunk in chunks:
                states.append(_rng_state(chunk.device))
                outs.append(encode(chunk))
        ctx.encode, ctx.chunks, ctx.states = encode, chunks, states
        ctx.sizes = [o.size(0) for o in outs]
        return torch.cat(outs).detach()

    @staticmethod
    def backward(ctx, grad_z):
        device = ctx.chunks[0].device
        after = _rng_state(device)
        with torch.enable_grad():
            for chunk, state, grad in zip(ctx.chunks, ctx.states, torch.split(grad_z, ctx.sizes)):
                _set_rng_state(state, device)
                z = ctx.encode(chunk)
                torch.autograd.backward(z, grad.to(z.dtype))
        _set_rng_state(after, device)
        return None, None, None, None


def cached_encode(encode, src_tokens: torch.Tensor, chunk_size: int, parameters) -> torch.Tensor:
    """``encode(src_tokens)`` with GradCache in chunks of ``chunk_size`` rows.

    ``encode`` maps a (rows, T) LongTensor to (rows, dim) vectors through the model;
    ``parameters`` are the model's parameters (one that requires grad is attached so
    that the result is part of the graph).
    """
    if chunk_size <= 0 or src_tokens.size(0) <= chunk_size or not torch.is_grad_enabled():
        return encode(src_tokens)
    anchor = next((p for p in parameters if p.requires_grad), None)
    if anchor is None:  # nothing to train through the encoder (e.g. a frozen one)
        return encode(src_tokens)
    return _CachedEncode.apply(encode, src_tokens, chunk_size, anchor)
