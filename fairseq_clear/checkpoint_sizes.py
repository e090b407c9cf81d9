"""What a checkpoint's config may make us allocate: no more than its own weights need.

fairseq builds a model from the config stored in a checkpoint *before* it loads the weights,
so a 17 MB file whose config says ``max_positions = 10**9`` or ``encoder_layers = 100000``
makes the loader allocate hundreds of GB. Before anything is built, every size of the
accepted architectures (RoBERTa family, ``clear_roberta``) must be a positive integer under a
ceiling, agree with the shapes of the weights in the file (read from the mmap'ed state: no
tensor data is touched), and the model the config describes may hold at most
``MAX_GROWTH`` times the file's parameters (plus ``SLACK_PARAMETERS`` for heads a task adds).
"""

import dataclasses
import math
import os
from collections.abc import Set

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
    "sentence_mlm_layers": 2,
}
#: fields whose 0 means "the default" (the encoder's width; no CLSR encoder e)
ZERO_ALLOWED = {"projection_layers", "projection_hidden_dim", "projection_dim",
                "sentence_mlp_hidden_dim", "sentence_mlp_dim", "sentence_mlm_layers"}
MAX_GROWTH = 2.0
#: a projection head or CLSR's e that the file lacks is built fresh (a 1024-wide 2-layer head
#: is 2.1M parameters); more than this, the config asks for much more than the file holds
SLACK_PARAMETERS = 8_000_000
_ENCODER = "encoder.sentence_encoder."


class CheckpointSizeError(FairseqClearError, ValueError):
    """A checkpoint's config asks for sizes its weights do not have (or no model could)."""


class CheckpointValueError(FairseqClearError, ValueError):
    """A checkpoint's config value is not what its option takes."""


def option_value(checkpoint: str, field: str, value, kind) -> str:
    """``value`` of a checkpoint's config as the command-line word of its option, checked to be what
    the option takes (``int``: a positive integer; ``float``: a finite positive number; a collection:
    one of its values). The recipes put these words into fairseq-train's command line: a string from
    the file must never become an option of its own (e.g. a second --user-dir) or a path."""
    try:
        if kind is int and not isinstance(value, bool) and int(value) == value and int(value) > 0:
            return str(int(value))
        if kind is float and not isinstance(value, bool) and 0 < float(value) < math.inf:
            return repr(float(value))
        if isinstance(kind, (list, tuple, Set)) and isinstance(value, str) and value in kind:  # Set: a dict's keys too
            return str(value)
    except (TypeError, ValueError, OverflowError):
        pass
    raise CheckpointValueError(f"{checkpoint}: {field} is {value!r}, not "
                                + ("a positive integer" if kind is int else "a finite positive number" if kind is float
                                   else f"one of {sorted(kind)}"))


def _get(section, key):
    if section is None:
        return None
    return section.get(key) if isinstance(section, dict) or hasattr(section, "get") else getattr(section, key, None)


def _shape(weights, name):
    tensor = weights.get(name) if isinstance(weights, dict) else None
    return tuple(tensor.shape) if hasattr(tensor, "shape") else None


def bounds(config_class) -> dict:
    """``{field: (low, high)}`` of a dataclass config's fields whose metadata gives ``bounds``: the
    inclusive range of a size or rate, written next to its option (the one list), checked at start-up
    and in a checkpoint's config before anything is built."""
    if not dataclasses.is_dataclass(config_class):
        return {}
    return {f.name: f.metadata["bounds"] for f in dataclasses.fields(config_class) if "bounds" in f.metadata}


def out_of_bounds(section, config_class):
    """``(field, value, why)`` for the first field of ``section`` outside its ``bounds`` (not a number
    of the field's kind, not finite, or out of range), else None."""
    for name, (low, high) in bounds(config_class).items():
        value = _get(section, name)
        if value is None:
            continue
        integer = isinstance(low, int) and isinstance(high, int)
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            return name, value, f"not {'an integer' if integer else 'a number'}"
        if not low <= value <= high:  # written so that nan fails too
            return name, value, f"outside {low}..{high}"
    return None


#: the model's rates: finite, in these ranges (a layer norm's eps of inf gives one vector for every
#: sentence; a dropout outside [0, 1] is refused by torch only at the first forward)
RATES = {"layernorm_eps": (1e-30, 1.0), "dropout": (0.0, 1.0), "attention_dropout": (0.0, 1.0),
         "activation_dropout": (0.0, 1.0), "pooler_dropout": (0.0, 1.0)}


def _registered(group: str, name):
    """(config class, component class) fairseq registered under ``name`` for ``group`` (task, criterion)."""
    from fairseq import criterions, tasks

    if group == "task":
        return tasks.TASK_DATACLASS_REGISTRY.get(name), tasks.TASK_REGISTRY.get(name)
    return criterions.CRITERION_DATACLASS_REGISTRY.get(name), criterions.CRITERION_REGISTRY.get(name)


def model_section(state):
    """The model config of a loaded checkpoint state (hydra ``cfg.model`` or legacy ``args``)."""
    cfg = state.get("cfg")
    model = _get(cfg, "model") if cfg is not None else None
    return model if model is not None else state.get("args")


def _parameters(weights) -> int:
    return sum(int(t.numel()) for t in weights.values() if hasattr(t, "numel")) if isinstance(weights, dict) else 0


def described_parameters(sizes: dict, vocab: int) -> int:
    """Parameters of the RoBERTa encoder (+ LM head, projection head, CLSR's e, InfoCSE's decoder) ``sizes``
    describe."""
    d, layers = sizes["encoder_embed_dim"], sizes["encoder_layers"]
    ffn, positions = sizes["encoder_ffn_embed_dim"], sizes["max_positions"]
    per_layer = 4 * d * d + 4 * d + 2 * d * ffn + ffn + d + 4 * d
    # InfoCSE's decoder (--sentence-mlm-layers): layers of the encoder's sizes
    total = (vocab + positions + 2) * d + (layers + sizes.get("sentence_mlm_layers", 0)) * per_layer + 2 * d
    total += d * d + 3 * d + vocab  # LM head: dense, layer norm, output bias (weights tied)
    for layer in sizes.get("sentence_dense", ()):  # an import's Dense layers (--sentence-dense)
        total += d * layer.out_features + layer.out_features * layer.bias
        d = layer.out_features
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
    from .models import dense

    weights = state.get("model")
    try:  # --sentence-dense: its widths bounded by the word's reader, its shapes those of the weights
        sizes["sentence_dense"] = dense.parse(_get(model, "sentence_dense"))
    except dense.SentenceDenseError as e:
        refuse(f"its config's {e}")
    width = sizes.get("encoder_embed_dim")
    if sizes["sentence_dense"] and width:
        for name, shape in dense.shapes(sizes["sentence_dense"], width).items():
            actual = _shape(weights, "sentence_dense." + name)
            if actual != shape:
                refuse(f"its config's sentence_dense {_get(model, 'sentence_dense')} builds sentence_dense.{name} "
                       f"of shape {shape}, but its weights have {actual}")
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
    for field, (low, high) in RATES.items():
        value = _get(model, field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not low <= value <= high):
            refuse(f"its config's {field} is {value!r}, not a number in {low:g}..{high:g}")
    cfg = state.get("cfg")
    sections = {group: _get(cfg, group) if cfg is not None else state.get("args") for group in ("task", "criterion")}
    names = {"task": _get(sections["task"], "_name") or _get(state.get("args"), "task"),
             "criterion": _get(sections["criterion"], "_name") or _get(state.get("args"), "criterion")}
    for group, section in sections.items():
        config_class, _ = _registered(group, names[group]) if isinstance(names[group], str) else (None, None)
        problem = out_of_bounds(section, config_class)
        if problem:
            refuse("its config's {} option {} is {!r}: {}".format(group, *problem))
    heads, width = sizes.get("encoder_attention_heads"), sizes.get("encoder_embed_dim")
    if heads and width and width % heads:
        refuse(f"its config's encoder_embed_dim {width} is not a multiple of encoder_attention_heads {heads}")
    needed = ("encoder_embed_dim", "encoder_layers", "encoder_ffn_embed_dim", "max_positions")
    if all(k in sizes for k in needed):
        vocab = embed[0] if embed else 0
        described, held = described_parameters(sizes, vocab), _parameters(weights)
        # heads a task adds where fairseq builds the model (seed 004's), as the task builds them
        task_class = _registered("task", names["task"])[1] if isinstance(names["task"], str) else None
        head_shapes = getattr(task_class, "built_head_shapes", None)
        if head_shapes is not None:
            representation = sizes.get("sentence_mlp_dim") if sizes.get("sentence_mlp_hidden_dim") else 0
            dense_width = sizes["sentence_dense"][-1].out_features if sizes["sentence_dense"] else 0
            try:
                shapes, parameters = head_shapes(sections["task"], representation or dense_width
                                                 or sizes["encoder_embed_dim"],
                                                 weights if isinstance(weights, dict) else {})
            except FairseqClearError as e:
                refuse(f"its task config cannot build its heads: {e}")
            for name, shape in shapes.items():
                actual = _shape(weights, name)
                if actual is not None and actual != shape:
                    refuse(f"its task config builds {name} of shape {tuple(shape)}, but its weights have "
                           f"{actual}")
            described += parameters
        if described > MAX_GROWTH * held + SLACK_PARAMETERS:
            refuse(f"its config describes a model of {described:,} parameters, but the file holds "
                   f"{held:,}: loading it would allocate far more than its own weights")


# ---- Hugging Face model directories (clear-import-hf, clear-eval-sts --model) ------------------
# transformers builds a model from config.json before it loads the weights, exactly as fairseq does
# from a checkpoint's config: ``intermediate_size = 10**9`` allocates 128 GB. check_hf_sizes reads
# the weights' shapes from the safetensors header (or the mmap'ed weights-only pickle) and refuses
# a config that is not what the weights are, exceeds a ceiling, or describes much more than the file.

#: size fields of the encoders whose sizes we can check, by config.json model_type (the BERT family;
#: DistilBERT names them differently); role -> field name
_BERT_NAMES = {"layers": "num_hidden_layers", "width": "hidden_size", "ffn": "intermediate_size",
               "heads": "num_attention_heads", "positions": "max_position_embeddings", "vocab": "vocab_size",
               "types": "type_vocab_size"}
HF_SIZE_FIELDS = {
    "bert": _BERT_NAMES, "roberta": _BERT_NAMES, "xlm-roberta": _BERT_NAMES, "camembert": _BERT_NAMES,
    "mpnet": dict(_BERT_NAMES, types=None, buckets="relative_attention_num_buckets"),
    "distilbert": {"layers": "n_layers", "width": "dim", "ffn": "hidden_dim", "heads": "n_heads",
                   "positions": "max_position_embeddings", "vocab": "vocab_size", "types": None},
}
#: ceilings by role (positions: RoBERTa's two extra rows on top of CEILINGS' max_positions)
HF_CEILINGS = {"layers": CEILINGS["encoder_layers"], "width": CEILINGS["encoder_embed_dim"],
               "ffn": CEILINGS["encoder_ffn_embed_dim"], "heads": CEILINGS["encoder_attention_heads"],
               "positions": CEILINGS["max_positions"] + 2, "vocab": 2**22, "types": 1024, "buckets": 65536}
#: bytes per element of each safetensors dtype
_SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                      "U16": 2, "U32": 4, "U64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
#: the most a safetensors header may take (safetensors' own limit)
_MAX_HEADER = 100_000_000


def _weights_unreadable(path, why):
    return CheckpointSizeError(f"cannot read the weights' shapes from '{path}' (to check config.json's sizes "
                               f"against them before anything is allocated): {why}")


def safetensors_shapes(path) -> dict:
    """``{name: shape}`` from a safetensors file's header; no tensor data is read. Every tensor's
    bytes must lie in the file, so the shapes are what the file really holds."""
    import json

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 0 < length <= min(size - 8, _MAX_HEADER):
                raise _weights_unreadable(path, "not a safetensors file (no valid header length)")
            header = json.loads(f.read(length).decode("utf-8"))
    except OSError as e:
        raise _weights_unreadable(path, e) from None
    except (ValueError, RecursionError) as e:  # not UTF-8 / not JSON / nested too deeply
        raise _weights_unreadable(path, f"its header is not JSON ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise _weights_unreadable(path, "its header is not a JSON object")
    data = size - 8 - length
    shapes = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        itemsize = _SAFETENSORS_BYTES.get(entry.get("dtype")) if isinstance(entry, dict) else None
        if (not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape)
                or not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
                or itemsize is None):
            raise _weights_unreadable(path, f"tensor '{name}' has no valid dtype, shape and data_offsets")
        numel = 1
        for d in shape:
            numel *= d
        if not 0 <= offsets[0] <= offsets[1] <= data or offsets[1] - offsets[0] != numel * itemsize:
            raise _weights_unreadable(path, f"tensor '{name}' of shape {shape} is not backed by the file's bytes")
        shapes[name] = tuple(shape)
    return shapes


def weight_shapes(model_dir) -> tuple:
    """(the weights file(s) as named in messages, ``{name: shape}``) of a Hugging Face directory, in
    transformers' order (model.safetensors, its sharded index, pytorch_model.bin), read without
    allocating the tensors."""
    import json

    f = lambda name: os.path.join(model_dir, name)  # noqa: E731
    if os.path.isfile(f("model.safetensors")):
        return f("model.safetensors"), safetensors_shapes(f("model.safetensors"))
    if os.path.isfile(f("model.safetensors.index.json")):
        index_path = f("model.safetensors.index.json")
        try:
            with open(index_path, encoding="utf-8") as fh:
                index = json.load(fh)
        except (OSError, ValueError, RecursionError) as e:
            raise _weights_unreadable(index_path, f"{type(e).__name__}: {e}") from None
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise _weights_unreadable(index_path, "no 'weight_map' object of file names")
        shapes = {}
        for shard in sorted(set(weight_map.values())):
            if os.path.basename(shard) != shard or not os.path.isfile(f(shard)):
                raise _weights_unreadable(index_path, f"shard '{shard}' is not a file in '{model_dir}'")
            shapes.update(safetensors_shapes(f(shard)))
        return index_path, shapes
    if os.path.isfile(f("pytorch_model.bin")):
        import torch

        path = f("pytorch_model.bin")
        try:  # torch's zip format maps the storages: shapes without reading the data
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception:  # noqa: BLE001  the legacy format cannot be mapped: it is read (the file's own size)
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as e:  # noqa: BLE001  a pickle that needs code, or a damaged file
                raise _weights_unreadable(path, f"not plain weights ({type(e).__name__})") from None
        if not isinstance(state, dict):
            raise _weights_unreadable(path, f"a {type(state).__name__}, not a dict of tensors")
        return path, {k: tuple(v.shape) for k, v in state.items() if isinstance(k, str) and hasattr(v, "shape")}
    raise CheckpointSizeError(f"'{model_dir}' has no model.safetensors or pytorch_model.bin (nor a sharded "
                              "model.safetensors.index.json): no weights to build its config.json's model from")


def _suffix_shape(shapes, suffix):
    found = sorted(k for k in shapes if k == suffix or k.endswith("." + suffix))
    shape = shapes[found[0]] if found else None
    return shape if shape and len(shape) == 2 else None


def check_hf_sizes(model_dir, cfg=None) -> None:
    """Refuse a Hugging Face model directory whose config.json sizes are not what its weights are,
    exceed a ceiling, or describe a model much larger than its weights file holds; before anything
    (transformers, the import) allocates from config.json. ``cfg``: config.json, if already read."""
    import json
    import re

    path = os.path.join(model_dir, "config.json")
    if cfg is None:
        try:
            with open(path, encoding="utf-8") as fh:
                cfg = json.load(fh)
        except (OSError, ValueError, RecursionError) as e:
            raise CheckpointSizeError(f"{path}: cannot read it ({type(e).__name__})") from None
    if not isinstance(cfg, dict):
        raise CheckpointSizeError(f"{path}: must be a JSON object of model options, got a {type(cfg).__name__}")
    names = HF_SIZE_FIELDS.get(cfg.get("model_type"))
    if names is None:
        raise CheckpointSizeError(
            f"{path}: model_type {cfg.get('model_type')!r}: its sizes cannot be checked against its weights "
            f"before the model is built (supported: {', '.join(HF_SIZE_FIELDS)})")

    def refuse(message):
        raise CheckpointSizeError(f"{path}: {message}")

    sizes = {}
    for role, field in names.items():
        if field is None or field not in cfg:
            continue
        value = cfg[field]
        if type(value) is not int:
            refuse(f"'{field}' must be an integer, got {value!r}")
        low = 0 if role == "types" else 1
        if not low <= value <= HF_CEILINGS[role]:
            refuse(f"'{field}' is {value}, outside {low}..{HF_CEILINGS[role]}")
        sizes[role] = value
    width, heads = sizes.get("width"), sizes.get("heads")
    if width and heads and width % heads:
        refuse(f"'{names['width']}' {width} is not a multiple of '{names['heads']}' {heads}")
    weights, shapes = weight_shapes(model_dir)
    word = _suffix_shape(shapes, "embeddings.word_embeddings.weight")
    positions = _suffix_shape(shapes, "embeddings.position_embeddings.weight")
    types = _suffix_shape(shapes, "embeddings.token_type_embeddings.weight")
    fc1 = (_suffix_shape(shapes, "encoder.layer.0.intermediate.dense.weight")
           or _suffix_shape(shapes, "transformer.layer.0.ffn.lin1.weight"))
    layer = re.compile(r"(?:^|\.)(?:encoder|transformer)\.layer\.(\d+)\.")
    layers = {m.group(1) for m in map(layer.search, shapes) if m}
    found = {"vocab": word and word[0], "width": word and word[1], "positions": positions and positions[0],
             "types": types and types[0], "ffn": fc1 and fc1[0], "layers": len(layers) or None}
    for role, actual in found.items():
        if actual is not None and role in sizes and sizes[role] != actual:
            refuse(f"it says {names[role]} {sizes[role]}, but the weights in '{weights}' have {actual}")
    held = 0
    for shape in shapes.values():
        numel = 1
        for d in shape:
            numel *= d
        held += numel
    d = sizes.get("width", 768)
    per_layer = 4 * d * d + 4 * d + 2 * d * sizes.get("ffn", 4 * d) + sizes.get("ffn", 4 * d) + 5 * d
    described = ((sizes.get("vocab", 0) + sizes.get("positions", 0) + sizes.get("types", 0)) * d + 2 * d
                 + sizes.get("layers", 0) * per_layer + d * d + d  # the pooler, built fresh when absent
                 + sizes.get("buckets", 0) * (heads or 1))
    if described > MAX_GROWTH * held + SLACK_PARAMETERS + d * d:
        refuse(f"its sizes describe a model of {described:,} parameters, but '{weights}' holds {held:,}: "
               "building it would allocate far more than its own weights")
