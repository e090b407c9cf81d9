"""Import a Hugging Face BERT, RoBERTa or XLM-R checkpoint as a fairseq RoBERTa directory.

The inverse of :mod:`fairseq_clear.export.hf`. From a local model directory
(config.json, model.safetensors or pytorch_model.bin, tokenizer files; we never
download) it writes::

    OUT/model.pt               fairseq checkpoint (task masked_lm, arch clear_roberta)
    OUT/dict.txt               the model's vocabulary in fairseq's layout
    OUT/<tokenizer files>      encoder.json + vocab.bpe (RoBERTa), vocab.txt (BERT),
                               sentencepiece.model (XLM-R)
    OUT/clear_tokenizer.json   which tokenizer made dict.txt
    OUT/fairseq_args.txt       the --arch options that rebuild this encoder in fairseq-train

The mapping onto fairseq's post-LN RoBERTa encoder: BERT's token-type embedding
(type 0; RoBERTa has one type) is added to every position row, since fairseq has
no token types; BERT's positions 0.. move to fairseq's rows 2.. (fairseq counts
positions from padding_idx + 1), RoBERTa's already start there; [CLS], [PAD],
[SEP], [UNK], [MASK] become <s>, <pad>, </s>, <unk>, <mask>; layer norm epsilon
and activation come from config.json. BERT's pooler has no fairseq counterpart
and is left out (logged); a checkpoint without an LM head gets a fresh one (logged).

Nothing in the directory is executed: config.json is JSON, weights are
safetensors or a weights-only torch pickle, tokenizers are data files.
"""

import json
import logging
import os
import shutil
from typing import Dict, List, Tuple

import torch

from ..vocabulary import BERT_SPECIALS, DEL_SYMBOL, FAIRSEQ_SPECIALS
from .output_dir import staged_output

logger = logging.getLogger(__name__)

#: config.json model_type -> the tokenizer kind its vocabulary is written as
SUPPORTED_MODEL_TYPES = {"bert": "bert", "roberta": "gpt2", "xlm-roberta": "sentencepiece"}
#: Hugging Face hidden_act -> fairseq activation
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_accurate", "gelu_pytorch_tanh": "gelu_accurate", "relu": "relu",
               "tanh": "tanh"}
ROBERTA_SPECIALS = FAIRSEQ_SPECIALS
FAIRSEQ_RESERVED = FAIRSEQ_SPECIALS + (DEL_SYMBOL,)


class ImportHfError(ValueError):
    """The model directory cannot be imported; the message names the file."""


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ImportHfError(f"cannot read '{path}': {e}") from None


def read_config(model_dir: str) -> dict:
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise ImportHfError(f"'{model_dir}' has no config.json: pass a Hugging Face model directory")
    cfg = _read_json(path)
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ImportHfError(
            f"{path}: model_type '{model_type}' is not supported; supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} (BERT, MiniLM, bge, SBERT; RoBERTa, DistilRoBERTa; XLM-R)"
        )
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ImportHfError(f"{path}: position_embedding_type '{cfg['position_embedding_type']}' "
                            "has no fairseq counterpart (only 'absolute')")
    if cfg.get("hidden_act", "gelu") not in ACTIVATIONS:
        raise ImportHfError(f"{path}: hidden_act '{cfg.get('hidden_act')}' is not one of {', '.join(ACTIVATIONS)}")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "vocab_size"):
        if not isinstance(cfg.get(key), int) or cfg[key] <= 0:
            raise ImportHfError(f"{path}: '{key}' must be a positive integer, got {cfg.get(key)!r}")
    return cfg


def read_weights(model_dir: str) -> Dict[str, torch.Tensor]:
    """The state dict of model.safetensors (possibly sharded) or pytorch_model.bin (weights only)."""
    f = lambda name: os.path.join(model_dir, name)  # noqa: E731
    if os.path.isfile(f("model.safetensors")):
        files = [f("model.safetensors")]
    elif os.path.isfile(f("model.safetensors.index.json")):
        index = _read_json(f("model.safetensors.index.json"))
        files = [f(n) for n in sorted(set(index.get("weight_map", {}).values()))]
    elif os.path.isfile(f("pytorch_model.bin")):
        path = f("pytorch_model.bin")
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # a pickle that needs code, or a damaged file
            raise ImportHfError(f"cannot load '{path}' as plain weights: {e}") from None
    else:
        raise ImportHfError(f"'{model_dir}' has no model.safetensors or pytorch_model.bin")
    from safetensors.torch import load_file

    state = {}
    for path in files:
        if not os.path.isfile(path) or os.path.basename(path) != os.path.relpath(path, model_dir):
            raise ImportHfError(f"weight file '{path}' (named in the index) does not exist in '{model_dir}'")
        try:
            state.update(load_file(path))
        except Exception as e:
            raise ImportHfError(f"cannot read '{path}': {e}") from None
    return state


def _strip(state, model_type) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """(encoder weights without the 'bert.'/'roberta.' prefix, LM-head weights)."""
    prefix = {"bert": "bert.", "roberta": "roberta.", "xlm-roberta": "roberta."}[model_type]
    encoder, head = {}, {}
    for k, v in state.items():
        if k.startswith("cls.predictions.") or k.startswith("lm_head."):
            head[k] = v
        elif k.startswith(prefix):
            encoder[k[len(prefix):]] = v
        elif k.startswith(("embeddings.", "encoder.", "pooler.")):
            encoder[k] = v
    return encoder, head


# ---- vocabulary ---------------------------------------------------------------------
def _bert_vocab(model_dir) -> List[str]:
    path = os.path.join(model_dir, "vocab.txt")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    tj = os.path.join(model_dir, "tokenizer.json")
    if os.path.isfile(tj):
        vocab = _read_json(tj).get("model", {}).get("vocab")
        if isinstance(vocab, dict):
            out = [""] * len(vocab)
            for token, i in vocab.items():
                out[i] = token
            return out
    raise ImportHfError(f"'{model_dir}' has no vocab.txt (BERT's WordPiece vocabulary) or tokenizer.json")


def _roberta_vocab(model_dir) -> Dict[str, int]:
    for name in ("vocab.json", "merges.txt"):
        if not os.path.isfile(os.path.join(model_dir, name)):
            raise ImportHfError(f"'{model_dir}' has no {name} (RoBERTa's byte-level BPE files)")
    vocab = _read_json(os.path.join(model_dir, "vocab.json"))
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise ImportHfError(f"'{os.path.join(model_dir, 'vocab.json')}' must map tokens to integer ids")
    return vocab


def _xlmr_pieces(model_dir) -> Tuple[str, List[str]]:
    import sentencepiece as spm

    path = os.path.join(model_dir, "sentencepiece.bpe.model")
    if not os.path.isfile(path):
        raise ImportHfError(f"'{model_dir}' has no sentencepiece.bpe.model (XLM-R's tokenizer)")
    sp = spm.SentencePieceProcessor(model_file=path)
    return path, [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def vocabulary_layout(model_dir, model_type) -> Tuple[List[int], List[str]]:
    """(HF id of each fairseq dictionary row, dict.txt symbols); rows = 4 specials + symbols + <mask>."""
    if model_type == "bert":
        tokens = _bert_vocab(model_dir)
        index = {t: i for i, t in enumerate(tokens)}
        missing = [t for t in BERT_SPECIALS if t not in index]
        if missing:
            raise ImportHfError(f"{model_dir}/vocab.txt lacks BERT's special tokens {', '.join(missing)}")
        specials = [index[t] for t in BERT_SPECIALS]
        body = [(i, t) for i, t in enumerate(tokens) if i not in specials]
    elif model_type == "roberta":
        vocab = _roberta_vocab(model_dir)
        missing = [t for t in ROBERTA_SPECIALS if t not in vocab]
        if missing:
            raise ImportHfError(f"{model_dir}/vocab.json lacks RoBERTa's special tokens {', '.join(missing)}")
        specials = [vocab[t] for t in ROBERTA_SPECIALS]
        # fairseq's gpt2 bpe writes encoder ids: with vocab.json as encoder.json, the HF ids
        body = [(i, str(i)) for i in sorted(vocab.values()) if i not in specials]
    else:
        _, pieces = _xlmr_pieces(model_dir)
        # HF's XLM-R: <s> <pad> </s> <unk>, then sentencepiece id i at i + 1, <mask> last
        specials = [0, 1, 2, 3, len(pieces) + 1]
        body = [(i + 1, p) for i, p in enumerate(pieces) if i >= 3]
    symbols = [t for _, t in body]
    bad = [t for t in symbols if not t or any(c.isspace() for c in t) or t in FAIRSEQ_RESERVED]
    if bad:
        raise ImportHfError(
            f"{model_dir}: {len(bad)} vocabulary entries cannot be dict.txt symbols (empty, with "
            f"whitespace, or one of fairseq's reserved {', '.join(FAIRSEQ_RESERVED)}): {bad[:5]}"
        )
    if len(set(symbols)) != len(symbols):
        raise ImportHfError(f"{model_dir}: the vocabulary has duplicate entries")
    rows = specials[:4] + [i for i, _ in body] + [specials[4]]
    return rows, symbols


def _copy_tokenizer(model_dir, model_type, out_dir, symbols):
    """Write the tokenizer files and return its :class:`~fairseq_clear.vocabulary.Tokenizer`."""
    from .. import vocabulary

    if model_type == "roberta":
        shutil.copyfile(os.path.join(model_dir, "vocab.json"), os.path.join(out_dir, "encoder.json"))
        shutil.copyfile(os.path.join(model_dir, "merges.txt"), os.path.join(out_dir, "vocab.bpe"))
        tj = None
        if os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
            tj = os.path.join(out_dir, "tokenizer.json")
            shutil.copyfile(os.path.join(model_dir, "tokenizer.json"), tj)
        return vocabulary.Gpt2Tokenizer(os.path.join(out_dir, "encoder.json"), os.path.join(out_dir, "vocab.bpe"), tj)
    if model_type == "xlm-roberta":
        path, _ = _xlmr_pieces(model_dir)
        shutil.copyfile(path, os.path.join(out_dir, "sentencepiece.model"))
        tj = None
        if os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
            tj = os.path.join(out_dir, "tokenizer.json")
            shutil.copyfile(os.path.join(model_dir, "tokenizer.json"), tj)
        return vocabulary.SentencepieceTokenizer(os.path.join(out_dir, "sentencepiece.model"), tj)
    vocab = os.path.join(out_dir, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.writelines(t + "\n" for t in _bert_vocab(model_dir))
    tj = None
    if os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
        tj = os.path.join(out_dir, "tokenizer.json")
        shutil.copyfile(os.path.join(model_dir, "tokenizer.json"), tj)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if os.path.isfile(os.path.join(model_dir, name)):
            shutil.copyfile(os.path.join(model_dir, name), os.path.join(out_dir, name))
    lowercase = vocabulary._bert_lowercase(model_dir)
    return vocabulary.WordpieceTokenizer(vocab, lowercase, tj)


# ---- weights ------------------------------------------------------------------------
def _get(state, key, where):
    if key not in state:
        raise ImportHfError(f"{where}: the weights lack '{key}'")
    return state[key]


def convert_state(enc, head, cfg, rows, where) -> Tuple[Dict[str, torch.Tensor], bool]:
    """fairseq RoBERTa state dict from Hugging Face encoder (and LM-head) weights."""
    model_type = cfg["model_type"]
    H = cfg["hidden_size"]
    g = lambda k: _get(enc, k, where).float()  # noqa: E731
    word = g("embeddings.word_embeddings.weight")
    if word.shape != (cfg["vocab_size"], H):
        raise ImportHfError(f"{where}: word embeddings have shape {tuple(word.shape)}, config.json says "
                            f"vocab_size {cfg['vocab_size']} x hidden_size {H}")
    if max(rows) >= word.size(0):
        raise ImportHfError(f"{where}: the tokenizer has ids up to {max(rows)} but the model only "
                            f"{word.size(0)} embedding rows")
    rows_t = torch.tensor(rows)
    pos = g("embeddings.position_embeddings.weight")
    types = enc.get("embeddings.token_type_embeddings.weight")
    type0 = types[0].float() if types is not None else torch.zeros(H)
    if model_type == "bert":
        # fairseq positions start at padding_idx + 1 = 2
        pos = torch.cat([torch.zeros(2, H), pos], 0)
    pos = pos + type0
    sd = {}
    e = "encoder.sentence_encoder."
    sd[e + "embed_tokens.weight"] = word[rows_t]
    sd[e + "embed_positions.weight"] = pos
    sd[e + "layernorm_embedding.weight"] = g("embeddings.LayerNorm.weight")
    sd[e + "layernorm_embedding.bias"] = g("embeddings.LayerNorm.bias")
    names = {
        "self_attn.q_proj": "attention.self.query", "self_attn.k_proj": "attention.self.key",
        "self_attn.v_proj": "attention.self.value", "self_attn.out_proj": "attention.output.dense",
        "self_attn_layer_norm": "attention.output.LayerNorm", "fc1": "intermediate.dense",
        "fc2": "output.dense", "final_layer_norm": "output.LayerNorm",
    }
    for i in range(cfg["num_hidden_layers"]):
        for ours, theirs in names.items():
            for p in ("weight", "bias"):
                sd[f"{e}layers.{i}.{ours}.{p}"] = g(f"encoder.layer.{i}.{theirs}.{p}")
    extra = sorted({k.split(".")[2] for k in enc if k.startswith("encoder.layer.")} - {str(i) for i in range(cfg["num_hidden_layers"])})
    if extra:
        raise ImportHfError(f"{where}: the weights have layers {extra} beyond num_hidden_layers {cfg['num_hidden_layers']}")
    if any(k.startswith("pooler.") for k in enc):
        logger.info("import: BERT's pooler (dense + tanh over [CLS]) has no fairseq counterpart; left out")
    if model_type == "bert":
        hk = {"dense": "cls.predictions.transform.dense", "layer_norm": "cls.predictions.transform.LayerNorm",
              "bias": "cls.predictions.bias"}
    else:
        hk = {"dense": "lm_head.dense", "layer_norm": "lm_head.layer_norm", "bias": "lm_head.bias"}
    has_head = hk["dense"] + ".weight" in head
    if has_head:
        for ours in ("dense", "layer_norm"):
            for p in ("weight", "bias"):
                sd[f"encoder.lm_head.{ours}.{p}"] = _get(head, f"{hk[ours]}.{p}", where).float()
        bias = head.get(hk["bias"])
        if bias is None:
            bias = head.get(hk["bias"].rsplit(".", 1)[0] + ".decoder.bias")
        sd["encoder.lm_head.bias"] = (bias.float() if bias is not None else torch.zeros(word.size(0)))[rows_t]
    else:
        logger.info("import: %s has no masked-LM head; starting a fresh one (fairseq's initialisation)", where)
        sd["encoder.lm_head.dense.weight"] = torch.empty(H, H).normal_(0, 0.02)
        sd["encoder.lm_head.dense.bias"] = torch.zeros(H)
        sd["encoder.lm_head.layer_norm.weight"] = torch.ones(H)
        sd["encoder.lm_head.layer_norm.bias"] = torch.zeros(H)
        sd["encoder.lm_head.bias"] = torch.zeros(len(rows))
    sd["encoder.lm_head.weight"] = sd[e + "embed_tokens.weight"]  # tied, as fairseq saves it
    return sd, has_head


def sentence_pooling(model_dir: str) -> str:
    """mean or cls from a sentence-transformers 1_Pooling/config.json; mean otherwise is not assumed."""
    path = os.path.join(model_dir, "1_Pooling", "config.json")
    if os.path.isfile(path):
        cfg = _read_json(path)
        if cfg.get("pooling_mode_cls_token"):
            return "cls"
        if cfg.get("pooling_mode_mean_tokens"):
            return "mean"
    return "cls"


def model_options(cfg, pooling) -> Dict[str, object]:
    """The fairseq-train model options that rebuild this encoder (also stored in the checkpoint)."""
    max_positions = cfg["max_position_embeddings"] - (2 if cfg["model_type"] != "bert" else 0)
    return {
        "encoder_layers": cfg["num_hidden_layers"],
        "encoder_embed_dim": cfg["hidden_size"],
        "encoder_ffn_embed_dim": cfg["intermediate_size"],
        "encoder_attention_heads": cfg["num_attention_heads"],
        "max_positions": max_positions,
        "activation_fn": ACTIVATIONS[cfg.get("hidden_act", "gelu")],
        "layernorm_eps": float(cfg.get("layer_norm_eps", 1e-12 if cfg["model_type"] == "bert" else 1e-5)),
        "dropout": float(cfg.get("hidden_dropout_prob", 0.1)),
        "attention_dropout": float(cfg.get("attention_probs_dropout_prob", 0.1)),
        "sentence_pooling": pooling,
    }


def fairseq_args(options) -> str:
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in options.items())


def _checkpoint_cfg(options, out_dir):
    """A complete fairseq config, as fairseq-train would save it (task masked_lm, arch clear_roberta)."""
    from fairseq import options as fairseq_options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    parser = fairseq_options.get_training_parser()
    argv = [out_dir, "--task", "masked_lm", "--arch", "clear_roberta", "--criterion", "masked_lm",
            "--tokens-per-sample", str(options["max_positions"]), "--cpu"]
    for k, v in options.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    args = fairseq_options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(args)
    cfg.task.data = "."
    cfg.model.data = "."
    return OmegaConf.to_container(cfg)


def import_hf(model_dir: str, out_dir: str, overwrite: bool = False, tolerance: float = 1e-4) -> dict:
    """Write ``out_dir`` from the Hugging Face model in ``model_dir``; returns a summary.

    The result is verified before it is published: the hub's last-layer features
    of a few sentences equal transformers' within ``tolerance`` when transformers
    is installed.
    """
    from .. import vocabulary

    model_dir = os.path.abspath(os.path.expanduser(str(model_dir)))
    if not os.path.isdir(model_dir):
        raise ImportHfError(f"model directory '{model_dir}' does not exist")
    cfg = read_config(model_dir)
    rows, symbols = vocabulary_layout(model_dir, cfg["model_type"])
    enc, head = _strip(read_weights(model_dir), cfg["model_type"])
    where = model_dir
    state, has_head = convert_state(enc, head, cfg, rows, where)
    options = model_options(cfg, sentence_pooling(model_dir))
    with staged_output(out_dir, overwrite=overwrite) as staging:
        with open(os.path.join(staging, "dict.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{s} 1\n" for s in symbols)
        tokenizer = _copy_tokenizer(model_dir, cfg["model_type"], staging, symbols)
        vocabulary.write_record(staging, tokenizer, os.path.join(staging, "dict.txt"))
        # no optimizer state: --restore-file starts a fresh optimizer, as --finetune-from-model does
        ckpt = {"cfg": _checkpoint_cfg(options, staging), "model": state, "args": None,
                "optimizer_history": [{"criterion_name": "MaskedLmLoss", "optimizer_name": "imported",
                                       "lr_scheduler_state": {"best": None}, "num_updates": 0}],
                "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0}},
                "last_optimizer_state": None}
        torch.save(ckpt, os.path.join(staging, "model.pt"))
        with open(os.path.join(staging, "fairseq_args.txt"), "w", encoding="utf-8") as f:
            f.write("--arch clear_roberta " + fairseq_args({k: v for k, v in options.items() if k != "sentence_pooling"}) + "\n")
        difference = verify(model_dir, staging, cfg)
        if difference is not None and difference > tolerance:
            raise ImportHfError(
                f"verification failed: the imported encoder differs from transformers' by {difference:.2e} "
                f"(> {tolerance:g}) on the check sentences; nothing was written to '{out_dir}'"
            )
        manifest = sorted(os.listdir(staging))
    return {"model_type": cfg["model_type"], "tokenizer": tokenizer.kind, "rows": len(rows),
            "lm_head": has_head, "max_difference": difference, "files": manifest, "options": options}


CHECK_SENTENCES = ["A man is playing a guitar.", "", "Ünïcödé accents, emoji 🙂 and numbers 12,345.67!",
                   "supercalifragilisticexpialidocious antidisestablishmentarianism"]


def verify(model_dir, staged_dir, cfg, sentences=CHECK_SENTENCES):
    """Largest |difference| of last-layer features, ours vs transformers' (None without transformers)."""
    try:
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        return None
    from ..models.hub_interface import from_pretrained

    hub = from_pretrained(staged_dir, "model.pt", ".")
    tok = AutoTokenizer.from_pretrained(model_dir)
    ref = AutoModel.from_pretrained(model_dir).eval()
    worst = 0.0
    with torch.no_grad():
        for s in sentences:
            ids = hub.tokenizer.encode([s])[0]
            ours = hub.model.sentence_features(ids.unsqueeze(0))[0]
            batch = tok(s, return_tensors="pt")
            if batch["input_ids"].size(1) != ids.numel():
                raise ImportHfError(f"verification failed: {len(ids)} tokens for {s!r}, transformers "
                                    f"gives {batch['input_ids'].size(1)}")
            theirs = ref(**batch).last_hidden_state[0]
            worst = max(worst, float((ours - theirs).abs().max()))
    return worst
