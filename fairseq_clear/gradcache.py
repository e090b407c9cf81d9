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

``encode_without_graph`` and ``attach`` are the two halves, so that the criterion can also
hold the pieces of several micro-batches and attach them all at the last one
(``--accumulate-contrastive``: one contrastive problem over an update's ``--update-freq``
micro-batches). Autocast is re-entered for the re-encoding as it was in the forward.

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


def _autocast_state(device):
    """(enabled, dtype) of autocast on ``device``: the re-encoding runs in the backward pass,
    outside the forward's autocast region, and must compute what the forward computed."""
    kind = device.type if device.type in ("cuda", "cpu") else "cpu"
    return kind, torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)


class _CachedEncode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, encode, pieces, anchor):
        ctx.encode, ctx.pieces = encode, pieces
        return torch.cat([p.out for p in pieces]).detach()

    @staticmethod
    def backward(ctx, grad_z):
        device = ctx.pieces[0].tokens.device
        after = _rng_state(device)
        grads = torch.split(grad_z, [p.out.size(0) for p in ctx.pieces])
        with torch.enable_grad():
            for piece, grad in zip(ctx.pieces, grads):
                _set_rng_state(piece.rng, device)
                kind, enabled, dtype = piece.autocast
                with torch.autocast(kind, dtype=dtype, enabled=enabled):
                    z = ctx.encode(piece.tokens)
                torch.autograd.backward(z, grad.to(z.dtype))
        _set_rng_state(after, device)
        return None, None, None


class Piece:
    """One chunk encoded without its graph: its rows, the RNG and autocast state it was
    encoded under, and its vectors."""

    __slots__ = ("tokens", "rng", "autocast", "out")

    def __init__(self, tokens, rng, autocast, out):
        self.tokens, self.rng, self.autocast, self.out = tokens, rng, autocast, out


def encode_frozen(encode, src_tokens: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``encode(src_tokens)`` under no_grad, ``chunk_size`` rows at a time (all at once when <= 0):
    the vectors of an encoder nothing trains (the momentum encoder, the guide) with one chunk's
    activations at a time, as --contrastive-chunk-size promises for the model's own."""
    with torch.no_grad():
        if chunk_size <= 0 or src_tokens.size(0) <= chunk_size:
            return encode(src_tokens)
        return torch.cat([encode(chunk) for chunk in torch.split(src_tokens, chunk_size)])


def encode_without_graph(encode, src_tokens: torch.Tensor, chunk_size: int) -> list:
    """``encode`` chunk by chunk (``chunk_size`` rows, all at once when <= 0) under no_grad,
    keeping what :func:`attach` needs to encode each chunk again with its graph."""
    pieces = []
    with torch.no_grad():
        for chunk in torch.split(src_tokens, chunk_size if chunk_size > 0 else max(1, src_tokens.size(0))):
            rng, autocast = _rng_state(chunk.device), _autocast_state(chunk.device)
            pieces.append(Piece(chunk, rng, autocast, encode(chunk)))
    return pieces


def attach(encode, pieces: list, parameters) -> torch.Tensor:
    """The pieces' vectors, concatenated, as part of the graph: the backward pass encodes each
    piece again (same dropout masks) and sends it its slice of the incoming gradient."""
    anchor = next((p for p in parameters if p.requires_grad), None)
    out = torch.cat([p.out for p in pieces])
    if anchor is None:  # nothing to train through the encoder (e.g. a frozen one)
        return out
    return _CachedEncode.apply(encode, pieces, anchor)


def cached_encode(encode, src_tokens: torch.Tensor, chunk_size: int, parameters) -> torch.Tensor:
    """``encode(src_tokens)`` with GradCache in chunks of ``chunk_size`` rows.

    ``encode`` maps a (rows, T) LongTensor to (rows, dim) vectors through the model;
    ``parameters`` are the model's parameters (one that requires grad is attached so
    that the result is part of the graph).
    """
    if chunk_size <= 0 or src_tokens.size(0) <= chunk_size or not torch.is_grad_enabled():
        return encode(src_tokens)
    parameters = [p for p in parameters if p.requires_grad]
    if not parameters:  # nothing to train through the encoder (e.g. a frozen one)
        return encode(src_tokens)
    return attach(encode, encode_without_graph(encode, src_tokens, chunk_size), parameters)
