"""The exported model's card (README.md): what the model is and how each tool reads its vector.

sentence-transformers writes a generic card; ours says which encoder, which paper's method and
options, which data and tokenizer, the pooling, and the right call for sentence-transformers,
transformers and SimCSE's tool (whose default reads RoBERTa's pooler, which the export does not
have: without ``pooler=...`` it would read a randomly initialised one).
"""

import os
from typing import Optional

from ..models.pooling import POOLINGS
from .errors import ExportError

#: --pretrained-kind (recorded by clear-import-hf) in words: what the model was before fairseq-clear touched it
STARTING_MODEL = {"sentence-embedding": "a sentence-transformers model", "encoder": "a pre-trained encoder"}

#: SimCSE's tool (simcse.SimCSE(..., pooler=...)) for each of our poolings
SIMCSE_POOLER = {"cls": "cls_before_pooler", "mean": "avg"}


def read_sts_table(path: str, pooling: Optional[str] = None) -> dict:
    """The zero-shot cosine STS table (task -> Spearman x 100) of a clear-eval-sts --json file, for
    ``pooling`` (default: the file's only pooling); from a ``--protocol senteval`` file its
    ``simcse`` table, since the card's table is labelled cosine."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)["results"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ExportError(f"--sts-results: '{path}' is not clear-eval-sts --json output ({e})") from None
    if pooling is None and len(results) == 1:
        pooling = next(iter(results))
    if pooling not in results:
        raise ExportError(f"--sts-results: '{path}' has no results for pooling '{pooling}' (it has: "
                          f"{', '.join(results)}); pass --pooling")
    entry = results[pooling]
    return dict(entry.get("tables", {}).get("simcse", entry["table"]))


def _get(cfg, key, default=None):
    try:
        return cfg.get(key, default) if hasattr(cfg, "get") else getattr(cfg, key, default)
    except Exception:  # an OmegaConf node with a missing value
        return default


class _Options:
    """A saved config (dict, OmegaConf node or Namespace) read with ``get(key, default)``."""

    def __init__(self, cfg):
        self.cfg = cfg

    def get(self, key, default=None):
        return _get(self.cfg, key, default)


def method(task_cfg, model_args) -> str:
    """The paper and options the checkpoint was trained with, in words: its registered task
    class's ``model_card_training(task_cfg, model_args)``; fairseq's masked_lm and other tasks
    by name."""
    from fairseq.tasks import TASK_REGISTRY

    name = _get(task_cfg, "_name", "?")
    describe = getattr(TASK_REGISTRY.get(name) if isinstance(name, str) else None, "model_card_training", None)
    if describe is not None:
        return describe(_Options(task_cfg), model_args)
    if name == "masked_lm" and _get(model_args, "pretrained_kind"):
        return "none by fairseq-clear: the imported model as it was (clear-import-hf)"
    if name == "masked_lm":
        return "masked language modelling only (a pre-trained or imported encoder, no contrastive training)"
    return f"fairseq task '{name}'"


def training_task_config(hub):
    """The task options as trained: the hub loads a checkpoint with inference overrides
    (augmentations none, no synonym table), so they are read again from the checkpoint."""
    path = getattr(hub, "checkpoint_path", None)
    if path:
        from ..checkpoint_safety import training_task_config as read

        task = read(path)
        if task:
            return task
    return hub.cfg.task


def render(hub, pooling: str, head: str, normalize: bool, modules: int, sts_table: Optional[dict] = None,
           literal_specials: Optional[dict] = None) -> str:
    model, args = hub.model, hub.model.args
    task_cfg = training_task_config(hub)
    tokenizer = hub.tokenizer.tokenizer
    data = os.path.basename(os.path.normpath(str(_get(task_cfg, "data", "") or ""))) or "?"
    # clear-import-hf's own checkpoint: not trained here, no training data of ours
    as_imported = _get(task_cfg, "_name") == "masked_lm" and bool(_get(args, "pretrained_kind"))
    lines = [
        "---",
        "library_name: sentence-transformers",
        "pipeline_tag: sentence-similarity",
        "tags: [sentence-transformers, feature-extraction, sentence-similarity, fairseq-clear]",
        "---",
        "",
        "# Sentence encoder exported by fairseq-clear",
        "",
        f"* **Encoder**: fairseq RoBERTa `{getattr(args, 'arch', '?')}`, {args.encoder_layers} layers x "
        f"{args.encoder_embed_dim}, {model.max_positions()} positions; {tokenizer.kind} tokenizer, "
        f"{len(hub.task.source_dictionary)} tokens.",
        *([f"* **Starting model**: {STARTING_MODEL[_get(args, 'pretrained_kind')]}, imported by clear-import-hf "
           f"with its {_get(args, 'pretrained_pooling') or pooling} pooling"
           + (f", Dense layers {_get(args, 'sentence_dense')}" if _get(args, "sentence_dense") else "")
           + (", unit-length vectors" if _get(args, "sentence_normalize") else "") + "."]
          if _get(args, "pretrained_kind") in STARTING_MODEL else []),
        f"* **Training**: {method(task_cfg, args)}.",
        *([] if as_imported else [f"* **Training data**: the binarized directory `{data}` (fairseq-clear's "
                                  "`clear-prepare` / `clear-prepare-pairs` output)."]),
        f"* **Sentence vector**: {pooling} pooling of the last layer"
        + (", then its Dense layers" if _get(args, "sentence_dense") and head != "pooled" else "")
        + {"representation": "", "mlp": ", then CLSR's MLP e", "projection": ", then the projection head g"}.get(head, f", head '{head}'")
        + (", L2-normalised" if normalize else "") + f" ({modules} sentence-transformers modules).",
    ]
    if hub.matryoshka_dims:
        trained_head = "projection" if getattr(model, "projection_head", None) is not None else "representation"
        lines.append(
            f"* **Matryoshka sizes**: the contrastive loss was trained at {', '.join(map(str, hub.matryoshka_dims))} "
            f"dimensions of the {trained_head} vectors; the export keeps all "
            f"{model.representation_dim(head)}"
            + (" (load with `SentenceTransformer('PATH', truncate_dim=D)` for the first D)" if trained_head == head
               else f" (this export's {head} vectors are not the trained ones: their prefixes were not trained)")
            + ".")
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "model = SentenceTransformer('PATH')",
        "vectors = model.encode(['A man is playing a guitar.', 'Someone plays an instrument.'])",
        "```",
        "",
        "With transformers alone (no pooler: the export has none):",
        "",
        "```python",
        "import torch",
        "from transformers import AutoModel, AutoTokenizer",
        "tokenizer, model = AutoTokenizer.from_pretrained('PATH'), AutoModel.from_pretrained('PATH', add_pooling_layer=False)",
        "sentences = ['A man is playing a guitar.', 'Someone plays an instrument.']",
        f"batch = tokenizer({_texts(hub)}, padding=True, truncation=True, max_length={hub.max_length}, "
        "return_tensors='pt')",
        "hidden = model(**batch).last_hidden_state",
        "mask = batch['attention_mask'].unsqueeze(-1).float()",
        f"vector = {POOLINGS[pooling].snippet}",
    ]
    dense = modules - 2 - int(bool(normalize))  # CLSR's e, the projection head g
    if dense:
        lines.append(f"# then the {dense} Dense module(s) of the export: use sentence-transformers for this vector")
    elif normalize:
        lines.append("vector = torch.nn.functional.normalize(vector, dim=-1)")
    lines += ["```", ""]
    if head == "representation" and pooling in SIMCSE_POOLER:
        lines += [
            "With SimCSE's tool, name the pooler (its default reads a pooler this model does not have, "
            "which transformers would initialise at random):",
            "",
            "```python",
            "from simcse import SimCSE",
            f"model = SimCSE('PATH', pooler='{SIMCSE_POOLER[pooling]}')",
            "```",
            "",
        ]
    else:
        lines += ["SimCSE's tool cannot reproduce this vector (" + ("it has a head after the pooling"
                  if head != "representation" else f"its poolers do not include {pooling}") + "): use "
                  "sentence-transformers.", ""]
    if sts_table:
        lines += ["## STS (Spearman x 100, cosine)", "", "| " + " | ".join(sts_table) + " |",
                  "|" + "---|" * len(sts_table), "| " + " | ".join(f"{v:.1f}" for v in sts_table.values()) + " |", ""]
    if literal_specials:
        lines += ["Special-token text typed in a sentence (`<s>`, `</s>`, `<mask>`) is text, as in fairseq: "
                  "`tokenizer_config.json` sets `split_special_tokens` for transformers, and `tokenizer.json` lists "
                  "the special tokens as vocabulary only, so that runtimes reading it alone (TEI, tokenizers) "
                  "give the same ids; their `decode()` then keeps `<s>` and `</s>` (`skip_special_tokens` does not "
                  "know them)"
                  + (f"; {', '.join(literal_specials['except'])} still become special tokens (the sentencepiece "
                     "model has no piece for some of their characters)" if literal_specials.get("except") else "")
                  + ".", ""]
    lines += ["Exported with `clear-export-hf`; `fairseq_clear_export.json` holds the export settings.", ""]
    return "\n".join(lines)


def _texts(hub) -> str:
    """The snippet's texts as the hub reads a sentence: its default prompt first, then lower-cased."""
    text = f"({hub.prompt!r} + s)" if hub.prompt else "s"
    text = f"{text}.lower()" if hub.lowercase else text
    return "sentences" if text == "s" else f"[{text} for s in sentences]"
