"""SentEval STS scoring for any encoder: library functions behind ``clear-eval-sts``.

An *encoder* here is a callable ``sentences -> {label: (N, dim) array}``: one label per
pooling of a fairseq-clear checkpoint (several poolings share one forward pass), or a
single label for a sentence-transformers / Hugging Face directory or any Python callable
``list[str] -> array`` (:func:`as_encoder`). :func:`evaluate_sts` scores each encoder on the
same pairs, so our models and baselines sit in one table.
"""

import logging
import os
import pickle
import time
from typing import Callable, Dict, List

import numpy as np
import torch

from ...checkpoint_sizes import check_hf_sizes
from ...errors import FairseqClearError, read_json
from ...preprocessing.sts_readers import (
    ALL_TASKS, SENTEVAL_COPY_DIR, TABLE2_TASKS, alignment_uniformity, load_task, resolve_sts_dirs,
    score_pairs, unique_sentences,
)

logger = logging.getLogger(__name__)


class ModelDirError(FairseqClearError, ValueError):
    """A --model directory whose files cannot be read or used; the message names the file."""


#: JSON files that transformers / sentence-transformers read from a model directory, and the
#: type each must have (they call .get/.items on them, and fail with no file name otherwise)
MODEL_JSON_FILES = {"config.json": dict, "tokenizer_config.json": dict, "special_tokens_map.json": dict,
                    "tokenizer.json": dict, "modules.json": list, "sentence_bert_config.json": dict,
                    "config_sentence_transformers.json": dict}


def _check_json_files(path, extra=()):
    """Each JSON file of the directory reads, and has the type its reader expects."""
    files = [(name, kind) for name, kind in MODEL_JSON_FILES.items()] + [(name, dict) for name in extra]
    for name, kind in files:
        file = os.path.join(path, name)
        if os.path.isfile(file):
            value = read_json(file, ModelDirError)
            if not isinstance(value, kind):
                raise ModelDirError(f"{file}: must be a JSON {'list' if kind is list else 'object'}, "
                                    f"got a {type(value).__name__}")


def _one_line(error) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


def _load_config(path):
    """transformers' config of ``path``; its strict field check names config.json here."""
    from transformers import AutoConfig

    try:
        from huggingface_hub.errors import StrictDataclassError  # config field types (transformers >= 5)
    except ImportError:
        StrictDataclassError = TypeError
    try:
        return AutoConfig.from_pretrained(path, trust_remote_code=False)
    except (TypeError, ValueError, OSError, StrictDataclassError) as e:
        raise ModelDirError(f"{os.path.join(path, 'config.json')}: transformers cannot use it: {_one_line(e)}") from None


def _weights_errors() -> tuple:
    """What loading a damaged weights file raises (safetensors' error is an Exception of its own)."""
    try:
        from safetensors import SafetensorError
    except ImportError:
        return (OSError, ValueError, RuntimeError, pickle.UnpicklingError)
    return (OSError, ValueError, RuntimeError, pickle.UnpicklingError, SafetensorError)


def _weights_file(path) -> str:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    return os.path.join(path, "model.safetensors")

Encoder = Callable[[List[str]], Dict[str, np.ndarray]]


class EncoderFn:
    """An :data:`Encoder` made by this module (so that a plain callable can be told apart)."""

    def __init__(self, fn):
        self.fn, self.truncated = fn, 0

    def __call__(self, sentences):
        return self.fn(sentences)


#: the protocols of ``clear-eval-sts --protocol`` (see :func:`score`)
PROTOCOLS = ("simcse", "senteval")
#: the tasks SentEval scores with its supervised regressor (train/dev/test)
SUPERVISED_TASKS = ("STS-B", "SICK-R")


def _split_key(split, task):
    return f"_{split}:{task}"


def load_sts(sts_dir, tasks=ALL_TASKS, copy="senteval", split="test", align_split="dev", skip_malformed=False,
             protocol="simcse"):
    """(pair sets by task, plus '_align' for alignment/uniformity and, for ``protocol='senteval'``,
    STS-B's and SICK-R's train and dev splits; the directory of each task)."""
    tasks = list(tasks)
    unknown = [t for t in tasks if t not in ALL_TASKS]
    if unknown:
        raise ValueError(f"--tasks: unknown task(s) {unknown}, choose from {ALL_TASKS}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got '{protocol}'")
    if protocol == "senteval" and split != "test":
        raise ValueError("--protocol senteval scores STS-B and SICK-R on test (its regressor is selected on dev): "
                         "--split dev is for --protocol simcse")
    dirs = resolve_sts_dirs(sts_dir, copy)
    if copy == "senteval" and not os.path.isdir(os.path.join(sts_dir, SENTEVAL_COPY_DIR)):
        logger.info("--sts-copy senteval: no %s/ in %s, so its files are taken as SentEval's copy",
                    SENTEVAL_COPY_DIR, sts_dir)
    pair_sets = {t: load_task(t, dirs[t], skip_malformed, split) for t in tasks}
    if protocol == "senteval":
        for t in tasks:
            if t in SUPERVISED_TASKS:
                for extra in ("train", "dev"):
                    pair_sets[_split_key(extra, t)] = load_task(t, dirs[t], skip_malformed, extra)
    if align_split != "none":
        pair_sets["_align"] = load_task("STS-B", dirs["STS-B"], skip_malformed, align_split)
    for name, pairs in pair_sets.items():
        task = "STS-B" if name == "_align" else name.split(":")[-1]
        logger.info("%s: %d pairs from %s", name.strip("_"), len(pairs), dirs[task])
    return pair_sets, dirs


def hub_encoder(hub, poolings=("cls", "mean"), head="representation", batch_size=64, show_progress=False,
                truncate_dims=()) -> Encoder:
    """A fairseq-clear hub, one label per pooling, one forward pass for all of them; with
    ``truncate_dims``, also ``pooling@d``: the first d dimensions (Matryoshka sizes)."""
    from ...models.inference import embed_tokens, encode_sentences, pooling_skip

    def encode(sentences):
        # the model's prompt, lower-casing and length, as embed()
        tokens, truncated = encode_sentences(hub.tokenizer, hub.model, sentences)
        wrapped.truncated = truncated
        if truncated:
            logger.warning("truncated %d sentences longer than %d positions", truncated, hub.max_length)
        vectors = embed_tokens(hub.model, tokens, list(poolings), head=head, batch_size=batch_size,
                               show_progress=show_progress, skip=pooling_skip(hub.tokenizer, hub.model))
        out = {}
        for p, v in vectors.items():
            out[p] = v.numpy()
            out.update({f"{p}@{d}": v[:, :d].numpy() for d in truncate_dims})
        return out

    wrapped = EncoderFn(encode)
    return wrapped


def as_encoder(model, label: str = None, batch_size: int = 64) -> Encoder:
    """A sentence-transformers or Hugging Face directory, a loaded SentenceTransformer, or a
    callable ``list[str] -> array`` as an encoder with one label."""
    if isinstance(model, EncoderFn):
        return model
    if isinstance(model, (str, bytes, os.PathLike)):
        return _directory_encoder(os.fsdecode(model), label, batch_size)
    if callable(model) and not isinstance(model, (str, os.PathLike)) and not hasattr(model, "encode"):
        return EncoderFn(lambda sentences: {label or "callable": np.asarray(model(sentences), dtype=np.float32)})
    if hasattr(model, "encode"):
        return EncoderFn(lambda sentences: {label or "st": np.asarray(
            model.encode(sentences, batch_size=batch_size, convert_to_numpy=True), dtype=np.float32)})
    raise TypeError(f"cannot use {type(model).__name__} as an encoder: give a directory, a model with "
                    "encode(), or a callable list[str] -> array")


def _directory_encoder(path, label, batch_size):
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--model '{path}' is not a directory (a sentence-transformers or Hugging Face model)")
    if os.path.isfile(os.path.join(path, "modules.json")):
        from sentence_transformers import SentenceTransformer

        modules = _check_modules(path)
        _check_json_files(path, [os.path.join(m["path"], "config.json") for m in modules
                                 if isinstance(m.get("path"), str) and m["path"]])
        if os.path.isfile(os.path.join(path, "config.json")):
            _load_config(path)
        _check_st_modules(path, modules)
        try:
            st = SentenceTransformer(path, device="cpu", trust_remote_code=False)
        except (TypeError, AttributeError, KeyError) + _weights_errors() as e:
            # its modules read files it does not name: name the directory and the likely ones
            raise ModelDirError(f"--model '{path}': sentence-transformers cannot load it (its modules, "
                                f"tokenizer or weights file {_weights_file(path)}): {_one_line(e)}") from None
        return as_encoder(st, label or "st", batch_size)
    if os.path.isfile(os.path.join(path, "config.json")):
        return _hf_mean_encoder(path, label or "mean", batch_size)
    raise FileNotFoundError(f"--model '{path}' has neither modules.json (sentence-transformers) nor config.json "
                            "(Hugging Face)")


def _check_st_modules(path, modules):
    """Each module's files, before sentence-transformers builds it: a Transformer's config.json sizes
    (transformers allocates from them) and sentence_bert_config.json, a Pooling's config.json types."""
    from ...export.from_hf import check_pooling_config, check_sentence_bert_config

    width = None
    for m in modules:
        directory = os.path.join(path, m["path"] if isinstance(m.get("path"), str) else "")
        kind = m["type"].rsplit(".", 1)[-1]
        config = os.path.join(directory, "config.json")
        if kind == "Transformer":
            check_hf_sizes(directory)
            cfg = read_json(config, ModelDirError) if os.path.isfile(config) else None
            check_sentence_bert_config(directory, cfg)
            width = cfg.get("hidden_size") if isinstance(cfg, dict) and type(cfg.get("hidden_size")) is int else None
        elif kind == "Pooling" and os.path.isfile(config):
            check_pooling_config(config, read_json(config, ModelDirError), width)


def _check_modules(path):
    """modules.json through the import's reader (export.from_hf.read_modules: only sentence_transformers.*
    classes, paths inside the folder), its errors naming the --model."""
    from ...export.from_hf import ImportHfError, SentenceTransformersConfigError, read_modules

    try:
        return read_modules(path)
    except (ImportHfError, SentenceTransformersConfigError) as e:
        raise ModelDirError(f"--model '{path}': {e}") from None


def _hf_mean_encoder(path, label, batch_size):
    from transformers import AutoModel, AutoTokenizer

    _check_json_files(path)
    check_hf_sizes(path)  # transformers allocates from config.json before it reads the weights
    config = _load_config(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except (TypeError, ValueError, AttributeError, KeyError, OSError) as e:
        raise ModelDirError(f"--model '{path}': transformers cannot read its tokenizer files (tokenizer.json, "
                            f"tokenizer_config.json, special_tokens_map.json, vocab files): {_one_line(e)}") from None
    try:
        model = AutoModel.from_pretrained(path, config=config, trust_remote_code=False).eval()
    except _weights_errors() as e:
        raise ModelDirError(f"--model '{path}': transformers cannot build the model from config.json and "
                            f"{_weights_file(path)}: {_one_line(e)}") from None

    max_length = _max_length(tokenizer, config)

    def encode(sentences):
        out = []
        for i in range(0, len(sentences), batch_size):
            batch = tokenizer(sentences[i:i + batch_size], padding=True, truncation=True, max_length=max_length,
                              return_tensors="pt")
            with torch.no_grad():
                hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            out.append(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).numpy())
        return {label: np.concatenate(out) if out else np.zeros((0, model.config.hidden_size), np.float32)}

    return EncoderFn(encode)


def _max_length(tokenizer, config):
    """Tokens a sentence may have: the tokenizer's limit, or, when it sets none (no
    model_max_length in tokenizer_config.json), the model's positions (RoBERTa-like models
    start theirs after the padding index)."""
    limit = getattr(tokenizer, "model_max_length", None)
    if limit is not None and limit < 1_000_000:
        return int(limit)
    positions = getattr(config, "max_position_embeddings", None)
    if not positions:
        return None
    if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "longformer"):
        positions -= (getattr(config, "pad_token_id", 1) or 0) + 1
    return int(positions)


def score(encoder: Encoder, pair_sets, align_split="dev", protocol="simcse", senteval_average="wmean",
          seed=1111, name: str = None) -> Dict[str, dict]:
    """Per label: the Table 2 row of ``protocol``, per-task scores, alignment/uniformity.

    ``simcse``: every task by the Spearman of cosine similarities, STS12-16 pooled ("all").
    ``senteval``: the original SentEval's numbers (CLEAR's Table 2): STS12-16 as the mean
    (``senteval_average='mean'``) or size-weighted mean (``'wmean'``) of the subsets' Spearman,
    STS-B and SICK-R as SentEval's regressor trained on the frozen vectors
    (:mod:`.relatedness`, ``seed``). Both tables are in ``tables``."""
    from ...models.inference import NonFiniteVectorsError, cosine_rows
    from .relatedness import evaluate_relatedness

    if protocol not in PROTOCOLS:
        raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got '{protocol}'")
    if senteval_average not in ("mean", "wmean"):
        raise ValueError(f"--senteval-average must be mean or wmean, got '{senteval_average}'")
    sentences, rows = unique_sentences(list(pair_sets.values()))
    start = time.time()
    vectors = encoder(sentences)
    logger.info("embedded %d distinct sentences in %.1f s", len(sentences), time.time() - start)
    results = {}
    for label, v in vectors.items():
        v = torch.as_tensor(np.asarray(v, dtype=np.float32))
        if v.shape[0] != len(sentences):
            raise ValueError(f"encoder '{label}' returned {v.shape[0]} vectors for {len(sentences)} sentences")
        bad = (~torch.isfinite(v.reshape(len(v), -1)).all(dim=1)).nonzero().flatten().tolist()
        if bad:  # their similarities would be NaN: no score is computed from them
            raise NonFiniteVectorsError(
                f"{name or 'encoder'} ({label}): {len(bad)} of {len(sentences)} sentence vectors are not finite "
                f"(NaN/Inf), e.g. of {sentences[bad[0]][:60]!r}: the model gives no usable embedding, so no "
                "STS score is reported")
        per_task, pairs_vectors = {}, {}
        for (name, pairs), (r1, r2) in zip(pair_sets.items(), rows):
            a, b = v[torch.from_numpy(r1)], v[torch.from_numpy(r2)]
            pairs_vectors[name] = (a.numpy(), b.numpy(), pairs)
            if name == "_align":
                per_task["_align"] = {"split": align_split, **alignment_uniformity(a.numpy(), b.numpy(), pairs.scores)}
            elif not name.startswith("_"):
                per_task[name] = score_pairs(pairs, cosine_rows(a, b))
        tables = {"simcse": {t: per_task[t]["spearman"] for t in TABLE2_TASKS if t in per_task}}
        if protocol == "senteval":
            tables["senteval"] = {}
            for t in TABLE2_TASKS:
                if t not in per_task:
                    continue
                if t in SUPERVISED_TASKS:
                    splits = {}
                    for split, key in (("train", _split_key("train", t)), ("dev", _split_key("dev", t)), ("test", t)):
                        a, b, pairs = pairs_vectors[key]
                        splits[split] = (a, b, pairs.scores, pairs.sent1, pairs.sent2)
                    start = time.time()
                    per_task[t]["senteval"] = evaluate_relatedness(splits, seed)
                    logger.info("%s %s: SentEval regressor, %d epochs in %.1f s", label, t,
                                per_task[t]["senteval"]["epochs"], time.time() - start)
                else:
                    per_task[t]["senteval"] = {k: per_task[t][k] for k in ("mean", "wmean", "pearson_mean",
                                                                           "pearson_wmean")}
                    per_task[t]["senteval"]["spearman"] = per_task[t][senteval_average]
                tables["senteval"][t] = per_task[t]["senteval"]["spearman"]
        for table in tables.values():
            table["Avg"] = float(np.mean(list(table.values()))) if table else float("nan")
        results[label] = {
            "table": tables[protocol],
            "tables": tables,
            "tasks": {k: x for k, x in per_task.items() if k != "_align"},
            "alignment_uniformity": per_task.get("_align"),
        }
    return results


def evaluate_sts(encoders: Dict[str, object], sts_dir, tasks=ALL_TASKS, copy="senteval", split="test",
                 align_split="dev", skip_malformed=False, protocol="simcse",
                 senteval_average="wmean") -> Dict[str, Dict[str, dict]]:
    """``{model name: {label: results}}`` for encoders given as :data:`Encoder`, directories or callables."""
    pair_sets, _ = load_sts(sts_dir, tasks, copy, split, align_split, skip_malformed, protocol)
    out = {}
    for name, enc in encoders.items():
        out[name] = score(as_encoder(enc), pair_sets, align_split, protocol, senteval_average, name=name)
    return out
