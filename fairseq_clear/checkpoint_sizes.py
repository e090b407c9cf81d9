"""What a checkpoint's config may make us allocate: no more than its own weights need.

fairseq builds a model from the config stored in a checkpoint *before* it loads the weights,
so a 17 MB file whose config says ``max_positions = 10**9`` or ``encoder_layers = 100000``
makes the loader allocate hundreds of GB. Before anything is built, every size of the
accepted architectures (RoBERTa family, ``clear_roberta``) must be a positive integer under a
ceiling, agree with the shapes of the weights in the file (read from the mmap'ed state: no
tensor data is touched), and the model the config describes may hold at most
``MAX_GROWTH`` times the file's parameters (plus ``SLACK_PARAMETERS`` for heads a task adds).
"""

from .errors import FairseqClearError

#: far above every released model of the family (RoBERTa-large: 24 x 1024, FFN 4096, 16 heads,
#: 512 positions; XLM-R XXL: 48 x 4096, FFN 16384, 32 heads, 512 positions), far below a bomb
CEILINGS = {
    "encoder_layers": 256,
    "encoder_embed_dim": 16384,
    "encoder_ffn_embed_dim": 65536,
    "encoder_attention_heads": 1024,
    "max_positions": 65536,
    "projection_layers": 16,
    "projection_hidden_dim": 65536,
    "projection_dim": 65536,
    "sentence_mlp_hidden_dim": 65536,
    "sentence_mlp_dim": 65536,
}
#: fields whose 0 means "the default" (the encoder's width; no CLSR encoder e)
ZERO_ALLOWED = {"projection_layers", "projection_hidden_dim", "projection_dim",
                "sentence_mlp_hidden_dim", "sentence_mlp_dim"}
MAX_GROWTH = 2.0
#: a projection head or CLSR's e that the file lacks is built fresh (a 1024-wide 2-layer head
#: is 2.1M parameters); more than this, the config asks for much more than the file holds
SLACK_PARAMETERS = 8_000_000
_ENCODER = "encoder.sentence_encoder."


class CheckpointSizeError(FairseqClearError, ValueError):
    """A checkpoint's config asks for sizes its weights do not have (or no model could)."""


def _get(section, key):
    if section is None:
        return None
    return section.get(key) if isinstance(section, dict) or hasattr(section, "get") else getattr(section, key, None)


def _shape(weights, name):
    tensor = weights.get(name) if isinstance(weights, dict) else None
    return tuple(tensor.shape) if hasattr(tensor, "shape") else None


def model_section(state):
    """The model config of a loaded checkpoint state (hydra ``cfg.model`` or legacy ``args``)."""
    cfg = state.get("cfg")
    model = _get(cfg, "model") if cfg is not None else None
    return model if model is not None else state.get("args")


def _parameters(weights) -> int:
    return sum(int(t.numel()) for t in weights.values() if hasattr(t, "numel")) if isinstance(weights, dict) else 0


def described_parameters(sizes: dict, vocab: int) -> int:
    """Parameters of the RoBERTa encoder (+ LM head, projection head, CLSR's e) ``sizes`` describe."""
    d, layers = sizes["encoder_embed_dim"], sizes["encoder_layers"]
    ffn, positions = sizes["encoder_ffn_embed_dim"], sizes["max_positions"]
    per_layer = 4 * d * d + 4 * d + 2 * d * ffn + ffn + d + 4 * d
    total = (vocab + positions + 2) * d + layers * per_layer + 2 * d
    total += d * d + 3 * d + vocab  # LM head: dense, layer norm, output bias (weights tied)
    mlp_hidden, mlp_out = sizes.get("sentence_mlp_hidden_dim", 0), sizes.get("sentence_mlp_dim", 0) or d
    if mlp_hidden:
        total += d * mlp_hidden + mlp_hidden + mlp_hidden * mlp_out + mlp_out
        d = mlp_out
    head_layers = sizes.get("projection_layers", 0)
    if head_layers:
        hidden, out = sizes.get("projection_hidden_dim", 0) or d, sizes.get("projection_dim", 0) or d
        dims = [d] + [hidden] * (head_layers - 1) + [out]
        total += sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))
    return total


def check_sizes(state, path) -> None:
    """Refuse ``state`` (a checkpoint read with its tensors mmap'ed) when its config's sizes are not
    what its weights are, exceed a ceiling, or describe a model much larger than the file."""
    model = model_section(state)
    if model is None:
        return  # nothing to build from (check_checkpoint_config refuses such a file anyway)

    def refuse(message):
        raise CheckpointSizeError(f"refusing checkpoint '{path}': {message}")

    sizes = {}
    for field, ceiling in CEILINGS.items():
        value = _get(model, field)
        if value is None and field == "max_positions":  # fairseq then builds from the task's
            value = _get(model, "tokens_per_sample")
            if value is None:
                value = _get(_get(state.get("cfg"), "task"), "tokens_per_sample")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            refuse(f"its config's {field} is {value!r}, not an integer")
        if not (0 <= value <= ceiling) or (value == 0 and field not in ZERO_ALLOWED):
            refuse(f"its config's {field} is {value}, outside 1..{ceiling}")
        sizes[field] = value
    weights = state.get("model")
    embed = _shape(weights, _ENCODER + "embed_tokens.weight")
    fc1 = _shape(weights, _ENCODER + "layers.0.fc1.weight")
    positions = _shape(weights, _ENCODER + "embed_positions.weight")
    layers = {k[len(_ENCODER + "layers."):].split(".")[0] for k in (weights or {}) if isinstance(k, str)
              and k.startswith(_ENCODER + "layers.")}
    found = {
        "encoder_embed_dim": embed[1] if embed and len(embed) == 2 else None,
        "encoder_ffn_embed_dim": fc1[0] if fc1 and len(fc1) == 2 else None,
        # fairseq's learned positions: max_positions rows + padding_idx (1) + 1
        "max_positions": positions[0] - 2 if positions and len(positions) == 2 else None,
        "encoder_layers": len(layers) if layers and not _get(model, "encoder_layers_to_keep") else None,
    }
    for field, actual in found.items():
        if actual is not None and field in sizes and sizes[field] != actual:
            refuse(f"its config's {field} is {sizes[field]} but its weights have {actual}")
    heads, width = sizes.get("encoder_attention_heads"), sizes.get("encoder_embed_dim")
    if heads and width and width % heads:
        refuse(f"its config's encoder_embed_dim {width} is not a multiple of encoder_attention_heads {heads}")
    needed = ("encoder_embed_dim", "encoder_layers", "encoder_ffn_embed_dim", "max_positions")
    if all(k in sizes for k in needed):
        vocab = embed[0] if embed else 0
        described, held = described_parameters(sizes, vocab), _parameters(weights)
        if described > MAX_GROWTH * held + SLACK_PARAMETERS:
            refuse(f"its config describes a model of {described:,} parameters, but the file holds "
                   f"{held:,}: loading it would allocate far more than its own weights")
