"""Import a Hugging Face BERT, RoBERTa or XLM-R checkpoint as a fairseq RoBERTa directory.

The inverse of :mod:`fairseq_clear.export.hf`. From a local model directory
(config.json, model.safetensors or pytorch_model.bin, tokenizer files; we never
download) it writes::

    OUT/model.pt               fairseq checkpoint (task masked_lm, arch clear_roberta)
    OUT/dict.txt               the model's vocabulary in fairseq's layout
    OUT/<tokenizer files>      encoder.json + vocab.bpe (RoBERTa), vocab.txt (BERT),
                               sentencepiece.model (XLM-R), + tokenizer.json; from
                               tokenizer.json alone when the directory has only that
                               (transformers >= 5's save_pretrained)
    OUT/clear_tokenizer.json   which tokenizer made dict.txt
    OUT/fairseq_args.txt       the --arch options that rebuild this encoder in fairseq-train

The mapping onto fairseq's post-LN RoBERTa encoder: BERT's token-type embedding
(type 0; RoBERTa has one type) is added to every position row, since fairseq has
no token types; BERT's positions 0.. move to fairseq's rows 2.. (fairseq counts
positions from padding_idx + 1), RoBERTa's already start there; [CLS], [PAD],
[SEP], [UNK], [MASK] become <s>, <pad>, </s>, <unk>, <mask>; layer norm epsilon
and activation come from config.json. BERT's pooler has no fairseq counterpart
and is left out (logged); a checkpoint without an LM head gets a fresh one (logged).
What would not convert exactly is refused before any weight is converted: an untied LM
head, a causal or cross-attention config, and in a sentence-transformers directory any
module beyond Transformer -> Pooling (one mode of models.pooling.POOLINGS) -> Dense... -> Normalize.
The source's max_seq_length, do_lower_case, prompts (and include_prompt), Dense modules and similarity
function are kept as model options (the Dense weights in the checkpoint), and the import is checked
against sentence-transformers' own encode() of the folder.

Nothing in the directory is executed: config.json is JSON, weights are
safetensors or a weights-only torch pickle, tokenizers are data files.
"""

import contextlib
import json
import logging
import math
import os
import shutil
import warnings
from typing import Dict, List, Tuple

import torch

from ..checkpoint_sizes import check_hf_sizes, weight_shapes
from ..models import dense as dense_modules
from ..models.inference import prompts_word, sentence_input
from ..models.pooling import POOLINGS, SIMILARITY_FUNCTIONS, from_st_mode
from ..vocabulary import BERT_SPECIALS, DEL_SYMBOL, FAIRSEQ_SPECIALS, SP_WORD_START
from .output_dir import check_output_dir, staged_output
from ..errors import FairseqClearError, NotUtf8Error, read_json

logger = logging.getLogger(__name__)

#: config.json model_type -> the tokenizer kind its vocabulary is written as
SUPPORTED_MODEL_TYPES = {"bert": "bert", "roberta": "gpt2", "xlm-roberta": "sentencepiece"}
#: Hugging Face hidden_act -> fairseq activation
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_accurate", "gelu_pytorch_tanh": "gelu_accurate", "relu": "relu",
               "tanh": "tanh"}
ROBERTA_SPECIALS = FAIRSEQ_SPECIALS
FAIRSEQ_RESERVED = FAIRSEQ_SPECIALS + (DEL_SYMBOL,)


class ImportHfError(FairseqClearError, ValueError):
    """The model directory cannot be imported; the message names the file."""


def _read_json(path):
    return read_json(path, ImportHfError)


def _read_json_object(path, what: str) -> dict:
    """``path``'s JSON, which must be an object (transformers calls .get/.items on it)."""
    value = _read_json(path)
    if not isinstance(value, dict):
        raise ImportHfError(f"{path}: must be a JSON object of {what}, got a {type(value).__name__}")
    return value


def _one_line(error) -> str:
    """A third-party message on one line (transformers' run over several), shortened."""
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def read_config(model_dir: str) -> dict:
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise ImportHfError(f"'{model_dir}' has no config.json: pass a Hugging Face model directory")
    cfg = _read_json(path)
    if not isinstance(cfg, dict):
        raise ImportHfError(f"{path}: must be a JSON object of model options, got a {type(cfg).__name__}")
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or model_type not in SUPPORTED_MODEL_TYPES:
        raise ImportHfError(
            f"{path}: model_type '{model_type}' is not supported; supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} (BERT, MiniLM, bge, SBERT; RoBERTa, DistilRoBERTa; XLM-R)"
        )
    # fairseq's encoder is bidirectional self-attention only: a causal decoder or cross-attention
    # (extra weights, another attention mask) would be imported as something it is not
    for key in ("is_decoder", "add_cross_attention"):
        if cfg.get(key, False) not in (False, None):
            raise ImportHfError(f"{path}: '{key}' is {cfg[key]!r}; only a bidirectional encoder "
                                f"(no causal or cross-attention) has a fairseq RoBERTa counterpart")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ImportHfError(f"{path}: position_embedding_type '{cfg['position_embedding_type']}' "
                            "has no fairseq counterpart (only 'absolute')")
    act = cfg.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise ImportHfError(f"{path}: hidden_act '{act}' is not one of {', '.join(ACTIVATIONS)}")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "vocab_size"):
        if not isinstance(cfg.get(key), int) or isinstance(cfg[key], bool) or cfg[key] <= 0:
            raise ImportHfError(f"{path}: '{key}' must be a positive integer, got {cfg.get(key)!r}")
    if "type_vocab_size" in cfg and (not isinstance(cfg["type_vocab_size"], int)
                                     or isinstance(cfg["type_vocab_size"], bool) or cfg["type_vocab_size"] < 0):
        raise ImportHfError(f"{path}: 'type_vocab_size' must be a non-negative integer, got {cfg['type_vocab_size']!r}")
    if "layer_norm_eps" in cfg and not (_number(cfg["layer_norm_eps"]) and 0 < cfg["layer_norm_eps"] < 1):
        raise ImportHfError(f"{path}: 'layer_norm_eps' must be a number in (0, 1), got {cfg['layer_norm_eps']!r}")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if key in cfg and not (_number(cfg[key]) and 0 <= cfg[key] < 1):
            raise ImportHfError(f"{path}: '{key}' must be a probability in [0, 1), got {cfg[key]!r}")
    if "tie_word_embeddings" in cfg and not isinstance(cfg["tie_word_embeddings"], bool):
        raise ImportHfError(f"{path}: 'tie_word_embeddings' must be true or false, got {cfg['tie_word_embeddings']!r}")
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
        try:
            with open(path, encoding="utf-8") as f:
                return [line.rstrip("\n") for line in f]
        except UnicodeDecodeError as e:
            raise NotUtf8Error(path, e) from None
    tj = os.path.join(model_dir, "tokenizer.json")
    if os.path.isfile(tj):
        model = _read_json_object(tj, "tokenizer options").get("model")
        vocab = model.get("vocab") if isinstance(model, dict) else None
        if isinstance(vocab, dict):
            ids = list(vocab.values())
            if sorted(i for i in ids if type(i) is int) != list(range(len(vocab))):
                raise ImportHfError(f"{tj}: model.vocab must map tokens to the ids 0 .. {len(vocab) - 1}, each once")
            out = [""] * len(vocab)
            for token, i in vocab.items():
                out[i] = token
            return out
        raise ImportHfError(f"{tj}: has no model.vocab object (BERT's WordPiece vocabulary), and there is no vocab.txt")
    raise ImportHfError(f"'{model_dir}' has no vocab.txt (BERT's WordPiece vocabulary) or tokenizer.json")


# the tokenizer's own files; transformers >= 5 saves RoBERTa's and XLM-R's tokenizer as tokenizer.json
# alone, which holds all they hold: fairseq's gpt2 and sentencepiece files are then derived from it
ROBERTA_FILES = ("vocab.json", "merges.txt")
XLMR_FILES = ("sentencepiece.bpe.model",)


def _roberta_vocab(model_dir) -> Dict[str, int]:
    if _tokenizer_json_only(model_dir, ROBERTA_FILES):
        return _roberta_bpe(model_dir)[0]
    for name in ROBERTA_FILES:
        if not os.path.isfile(os.path.join(model_dir, name)):
            raise ImportHfError(f"'{model_dir}' has no {name} (RoBERTa's byte-level BPE files: vocab.json + "
                                "merges.txt, or tokenizer.json alone)")
    vocab = _read_json(os.path.join(model_dir, "vocab.json"))
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise ImportHfError(f"'{os.path.join(model_dir, 'vocab.json')}' must map tokens to integer ids")
    return vocab


def _xlmr_pieces(model_dir) -> List[str]:
    import sentencepiece as spm

    if _tokenizer_json_only(model_dir, XLMR_FILES):
        try:
            sp = spm.SentencePieceProcessor(model_proto=_sentencepiece_of_unigram(model_dir))
        except RuntimeError as e:  # sentencepiece's own checks (a piece twice, ...)
            raise ImportHfError(f"{os.path.join(model_dir, 'tokenizer.json')}: its Unigram vocabulary is not a "
                                f"sentencepiece model: {_one_line(e)}") from None
    else:
        path = os.path.join(model_dir, XLMR_FILES[0])
        if not os.path.isfile(path):
            raise ImportHfError(f"'{model_dir}' has no sentencepiece.bpe.model (XLM-R's tokenizer) or tokenizer.json")
        sp = spm.SentencePieceProcessor(model_file=path)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def _tokenizer_json_only(model_dir, files) -> bool:
    """Whether the tokenizer is in tokenizer.json alone: none of its own ``files`` are there."""
    return (os.path.isfile(os.path.join(model_dir, "tokenizer.json"))
            and not any(os.path.isfile(os.path.join(model_dir, name)) for name in files))


def _steps(component) -> List[dict]:
    """A tokenizer.json normalizer or pre-tokenizer as its list of steps (a Sequence's, flattened)."""
    if not isinstance(component, dict):
        return []
    inner = component.get("normalizers", component.get("pretokenizers"))
    if component.get("type") == "Sequence" and isinstance(inner, list):
        return [step for c in inner for step in _steps(c)]
    return [component]


def _tokenizer_state(model_dir, model_type: str, what: str) -> Tuple[str, dict]:
    """(path, tokenizer.json) whose model is of ``model_type`` ('BPE', 'Unigram'), ``what`` the
    architecture's tokenizer in words."""
    path = os.path.join(model_dir, "tokenizer.json")
    state = _read_json_object(path, "tokenizer options")
    model = state.get("model")
    found = model.get("type") if isinstance(model, dict) else None
    if found != model_type:
        raise ImportHfError(f"{path}: its model is {found!r}, not {what} {model_type!r}")
    return path, state


def _roberta_bpe(model_dir) -> Tuple[Dict[str, int], List[str]]:
    """(vocabulary, merges as "a b" lines) of tokenizer.json's byte-level BPE: exactly what fairseq's gpt2
    files hold (encoder.json: the vocabulary; vocab.bpe: the merges in order)."""
    path, state = _tokenizer_state(model_dir, "BPE", "RoBERTa's byte-level")
    if not any(step.get("type") == "ByteLevel" for step in _steps(state.get("pre_tokenizer"))):
        raise ImportHfError(f"{path}: its pre_tokenizer has no ByteLevel step: not RoBERTa's byte-level BPE")
    vocab, merges = state["model"].get("vocab"), state["model"].get("merges")
    if not isinstance(vocab, dict) or not all(type(i) is int for i in vocab.values()):
        raise ImportHfError(f"{path}: model.vocab must map tokens to integer ids")
    if not isinstance(merges, list):
        raise ImportHfError(f"{path}: model.merges must be a list of merges")
    lines = []
    for k, merge in enumerate(merges):
        pair = merge.split(" ") if isinstance(merge, str) else merge  # "a b" (tokenizers < 0.20) or ["a", "b"]
        # byte-level tokens hold no whitespace (a space is 'Ġ'): anything else cannot be a vocab.bpe line
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(t, str) and t and t.split() == [t] for t in pair)):
            raise ImportHfError(f"{path}: model.merges[{k}] is not a pair of byte-level tokens: {merge!r:.80}")
        lines.append(" ".join(pair))
    return vocab, lines


def _sentencepiece_of_unigram(model_dir) -> bytes:
    """The sentencepiece model of XLM-R's tokenizer.json: transformers' conversion reversed. Its Unigram
    vocabulary is <s> <pad> </s> <unk>, sentencepiece's pieces 3.. with their scores, <mask>
    (sentencepiece's own first three are <unk> <s> </s>); its Precompiled normalizer and Metaspace
    prefix are sentencepiece's normalizer spec. The hub encodes with tokenizer.json itself; this model
    is for fairseq's sentencepiece bpe and clear-export-hf."""
    import base64

    path, state = _tokenizer_state(model_dir, "Unigram", "XLM-R's sentencepiece")
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb
    except ImportError as e:
        raise ImportHfError(f"{path}: converting it to a sentencepiece model needs protobuf "
                            f"(pip install protobuf): {e}") from None
    model = state["model"]
    vocab = model.get("vocab")
    if not isinstance(vocab, list) or not all(
            isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and _number(v[1]) and math.isfinite(v[1])
            for v in vocab):
        raise ImportHfError(f"{path}: model.vocab must be a list of [piece, finite score] pairs")
    if [p for p, _ in vocab[:4]] != list(ROBERTA_SPECIALS[:4]) or vocab[-1][0] != "<mask>" or model.get("unk_id") != 3:
        raise ImportHfError(f"{path}: the vocabulary is not XLM-R's (<s> <pad> </s> <unk> first, <mask> last, unk_id 3)")
    if model.get("byte_fallback"):
        raise ImportHfError(f"{path}: byte_fallback is on, which XLM-R's tokenizer never is")
    metaspace = [s for s in _steps(state.get("pre_tokenizer")) if s.get("type") == "Metaspace"]
    if len(metaspace) != 1 or metaspace[0].get("replacement") != SP_WORD_START:
        raise ImportHfError(f"{path}: its pre_tokenizer has no Metaspace step with '{SP_WORD_START}': "
                            "not XLM-R's sentencepiece tokenizer")
    charsmap = next((s.get("precompiled_charsmap") for s in _steps(state.get("normalizer"))
                     if s.get("type") == "Precompiled"), "")
    proto = pb.ModelProto()
    piece = pb.ModelProto.SentencePiece
    for text, score, kind in ([("<unk>", 0.0, piece.UNKNOWN), ("<s>", 0.0, piece.CONTROL), ("</s>", 0.0, piece.CONTROL)]
                              + [(p, s, piece.NORMAL) for p, s in vocab[4:-1]]):
        added = proto.pieces.add()
        added.piece, added.score, added.type = text, float(score), kind
    spec = proto.trainer_spec
    spec.model_type, spec.vocab_size = pb.TrainerSpec.UNIGRAM, len(proto.pieces)
    spec.unk_id, spec.bos_id, spec.eos_id, spec.pad_id = 0, 1, 2, -1
    normalizer = proto.normalizer_spec
    try:
        normalizer.precompiled_charsmap = base64.b64decode(charsmap, validate=True)
    except (TypeError, ValueError) as e:
        raise ImportHfError(f"{path}: the normalizer's precompiled_charsmap is not base64: {e}") from None
    normalizer.name = "nmt_nfkc" if charsmap else "identity"  # the charsmap is the rules; the name a label
    # Metaspace's prepend_scheme (tokenizers >= 0.14; add_prefix_space before) is sentencepiece's dummy prefix
    normalizer.add_dummy_prefix = metaspace[0].get("prepend_scheme", "always" if metaspace[0].get(
        "add_prefix_space", True) else "never") != "never"
    normalizer.remove_extra_whitespaces = normalizer.escape_whitespaces = True
    return proto.SerializeToString()


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
            source = "tokenizer.json" if _tokenizer_json_only(model_dir, ROBERTA_FILES) else "vocab.json"
            raise ImportHfError(f"{model_dir}/{source} lacks RoBERTa's special tokens {', '.join(missing)}")
        specials = [vocab[t] for t in ROBERTA_SPECIALS]
        # fairseq's gpt2 bpe writes encoder ids: with vocab.json as encoder.json, the HF ids
        body = [(i, str(i)) for i in sorted(vocab.values()) if i not in specials]
    else:
        pieces = _xlmr_pieces(model_dir)
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


def _copy_tokenizer_json(model_dir, out_dir):
    """The staged copy of ``model_dir``'s tokenizer.json (None without one), read first from the
    user's file so that an error names it, not the copy in the staging directory."""
    source = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(source):
        return None
    _read_json_object(source, "tokenizer options")
    copy = os.path.join(out_dir, "tokenizer.json")
    shutil.copyfile(source, copy)
    return copy


#: staged tokenizer file -> the files of the model directory it is made from, the first one there
STAGED_SOURCES = {"encoder.json": ("vocab.json", "tokenizer.json"), "vocab.bpe": ("merges.txt", "tokenizer.json"),
                  "sentencepiece.model": ("sentencepiece.bpe.model", "tokenizer.json"),
                  "tokenizer.json": ("tokenizer.json",), "vocab.txt": ("vocab.txt", "tokenizer.json")}


def _copy_tokenizer(model_dir, model_type, out_dir, symbols):
    """Write the tokenizer files and return its :class:`~fairseq_clear.vocabulary.Tokenizer`; an error
    reading them names the user's files, not their copies in the staging directory."""
    from ..vocabulary import TokenizerError

    try:
        return _stage_tokenizer(model_dir, model_type, out_dir, symbols)
    except TokenizerError as e:
        message = str(e)
        for staged, sources in STAGED_SOURCES.items():
            source = next((s for s in sources if os.path.isfile(os.path.join(model_dir, s))), None)
            if source is not None:
                message = message.replace(os.path.join(out_dir, staged), os.path.join(model_dir, source))
        raise TokenizerError(message) from None


def _stage_tokenizer(model_dir, model_type, out_dir, symbols):
    from .. import vocabulary

    if model_type == "roberta":
        encoder, merges = os.path.join(out_dir, "encoder.json"), os.path.join(out_dir, "vocab.bpe")
        if _tokenizer_json_only(model_dir, ROBERTA_FILES):
            vocab, lines = _roberta_bpe(model_dir)
            with open(encoder, "w", encoding="utf-8") as f:  # ASCII: fairseq reads it in the locale's encoding
                json.dump(vocab, f)
            with open(merges, "w", encoding="utf-8") as f:  # fairseq's reader skips the first line
                f.writelines(["#version: 0.2\n"] + [line + "\n" for line in lines])
        else:
            shutil.copyfile(os.path.join(model_dir, "vocab.json"), encoder)
            shutil.copyfile(os.path.join(model_dir, "merges.txt"), merges)
        return vocabulary.Gpt2Tokenizer(encoder, merges, _copy_tokenizer_json(model_dir, out_dir))
    if model_type == "xlm-roberta":
        model = os.path.join(out_dir, "sentencepiece.model")
        if _tokenizer_json_only(model_dir, XLMR_FILES):
            with open(model, "wb") as f:
                f.write(_sentencepiece_of_unigram(model_dir))
        else:
            shutil.copyfile(os.path.join(model_dir, XLMR_FILES[0]), model)
        return vocabulary.SentencepieceTokenizer(model, _copy_tokenizer_json(model_dir, out_dir))
    vocab = os.path.join(out_dir, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.writelines(t + "\n" for t in _bert_vocab(model_dir))
    tj = _copy_tokenizer_json(model_dir, out_dir)
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


def check_lm_head(enc, head, cfg, where):
    """Refuse an LM head whose output projection is not the word embeddings: fairseq RoBERTa's
    head shares the input embedding, so an untied decoder would be silently replaced by it."""
    if cfg.get("tie_word_embeddings", True):
        return  # transformers ties them on load; a stored decoder copy is ignored there too
    prefix = "cls.predictions." if cfg["model_type"] == "bert" else "lm_head."
    decoder = head.get(prefix + "decoder.weight")
    word = enc.get("embeddings.word_embeddings.weight")
    if decoder is None or word is None:
        return  # no head (a fresh one is made) or no embeddings (convert_state names the key)
    if decoder.shape != word.shape or not torch.equal(decoder.float(), word.float()):
        raise ImportHfError(
            f"{where}/config.json: 'tie_word_embeddings' is false and the weights' '{prefix}decoder.weight' "
            "differs from the word embeddings; fairseq RoBERTa's LM head shares the input embedding, "
            "so this untied head cannot be imported (drop the LM head weights to get a fresh, tied one)"
        )


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
    if types is not None and types.size(0) > 1:
        # fairseq has no token types: right for single-segment input, which is all fairseq feeds
        logger.info("import: token-type embedding rows 1..%d are dropped (only type 0 is folded into "
                    "the positions); inputs are single-segment", types.size(0) - 1)
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


#: sentence-transformers module classes that have a counterpart here (Dense: --sentence-dense; Normalize:
#: embed(normalize=True)); modules.json names them sentence_transformers.models.X (< 6) or by their
#: defining module (>= 6)
ST_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")
#: sentence-transformers' older 1_Pooling/config.json flags -> its mode names
ST_LEGACY_POOLING = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                     "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                     "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


def read_modules(model_dir: str) -> List[dict]:
    """modules.json of a sentence-transformers folder ([] without one): the one reader of it (the import,
    clear-eval-sts --model). A list of modules, each naming a ``sentence_transformers.*`` class (before
    version 6 sentence-transformers imported any class a local folder named: code) and a path inside
    the folder."""
    path = os.path.join(model_dir, "modules.json")
    if not os.path.isfile(path):
        return []
    modules = _read_json(path)
    if not isinstance(modules, list) or not all(
            isinstance(m, dict) and isinstance(m.get("type"), str) and isinstance(m.get("path", ""), str)
            for m in modules):
        raise SentenceTransformersConfigError(f"{path}: must be a list of modules, each with a 'type' and a 'path'")
    for m in modules:
        if not m["type"].startswith("sentence_transformers."):
            raise SentenceTransformersConfigError(f"{path} names the module type {m['type']!r}; only "
                                                  "sentence_transformers.* modules are loaded (a class named by a "
                                                  "file is code)")
        where = m.get("path", "")
        if os.path.isabs(where) or ".." in where.replace("\\", "/").split("/"):
            raise SentenceTransformersConfigError(f"{path}: module path '{where}' is outside the model directory")
    return modules


def _st_modules(model_dir: str) -> List[dict]:
    """modules.json's entries (:func:`read_modules`), refusing any module the import would otherwise
    leave out silently."""
    path = os.path.join(model_dir, "modules.json")
    modules = read_modules(model_dir)
    if not modules:
        return modules
    for m in modules:
        if m["type"].rsplit(".", 1)[1] not in ST_MODULES:
            raise ImportHfError(f"{path}: module '{m.get('path') or m.get('name')}' of type '{m['type']}' has "
                                f"no fairseq counterpart (only {', '.join(ST_MODULES)})")
    types = [m["type"].rsplit(".", 1)[1] for m in modules]
    middle = types[2:-1] if types[-1] == "Normalize" else types[2:]
    if types[:2] not in (["Transformer"], ["Transformer", "Pooling"]) or any(t != "Dense" for t in middle):
        # sentence-transformers' order: the Dense modules project the pooled vector, Normalize comes last
        raise ImportHfError(f"{path}: modules {' -> '.join(types)} are not Transformer -> Pooling (-> Dense...) "
                            "(-> Normalize)")
    if modules[0].get("path", "") not in ("", "."):
        raise ImportHfError(f"{path}: the Transformer lives in '{modules[0]['path']}', not in '{model_dir}' "
                            "itself: import that directory")
    return modules


#: the pooling of a folder with no pooling config (a plain save_pretrained folder): sentence-transformers'
#: default, which SentenceTransformer(folder) and clear-eval-sts --model apply to such a folder too
NO_POOLING_CONFIG = "mean"


def sentence_pooling(model_dir: str) -> str:
    """Our pooling (``models.pooling.POOLINGS``) of a sentence-transformers Pooling config
    (1_Pooling/config.json); without one, ``NO_POOLING_CONFIG`` (mean), as sentence-transformers pools
    such a folder.

    A mode the table lacks, or several at once (concatenated), is refused: the imported model would
    embed differently from the sentence-transformers model."""
    modules = _st_modules(model_dir)
    pooling_dir = modules[1].get("path", "") if len(modules) > 1 else "1_Pooling"
    if os.path.isabs(pooling_dir) or ".." in pooling_dir.replace("\\", "/").split("/"):
        raise ImportHfError(f"{os.path.join(model_dir, 'modules.json')}: pooling path '{pooling_dir}' "
                            "is outside the model directory")
    path = os.path.join(model_dir, pooling_dir, "config.json")
    if not os.path.isfile(path):
        if len(modules) > 1:
            raise ImportHfError(f"{os.path.join(model_dir, 'modules.json')}: the Pooling module's {path} does not exist")
        return NO_POOLING_CONFIG
    cfg = _read_json(path)
    if not isinstance(cfg, dict):
        raise ImportHfError(f"{path}: must be a JSON object of pooling options")
    check_pooling_config(path, cfg)
    if "pooling_mode" in cfg:  # sentence-transformers >= 6: one mode name or a list of them
        names = cfg["pooling_mode"] if isinstance(cfg["pooling_mode"], list) else [cfg["pooling_mode"]]
        modes = [(f"pooling_mode {n!r}", n if isinstance(n, str) else None) for n in names]
    else:  # the older pooling_mode_* flags
        modes = [(k, ST_LEGACY_POOLING.get(k, k)) for k, v in cfg.items()
                 if k.startswith("pooling_mode_") and v not in (False, None)]
    ours = from_st_mode(modes[0][1]) if len(modes) == 1 else None
    if ours is None:
        known = ", ".join(p.st_mode for p in POOLINGS.values())
        raise ImportHfError(f"{path}: pooling mode {' + '.join(m for m, _ in modes) or 'none'} is not supported; "
                            f"only exactly one of {known}")
    return ours


class SentenceTransformersConfigError(FairseqClearError, ValueError):
    """A sentence-transformers config file holds a field of the wrong type or size; the message names both."""


def check_pooling_config(path: str, cfg: dict, width=None) -> None:
    """A Pooling module's config.json has the types sentence-transformers reads it with: its mode flags
    are true/false (``"yes"``, a list or a number would be taken as a mode, or as none), ``pooling_mode``
    a name or a list of names, the embedding dimension a positive integer (``width``, when known)."""
    def refuse(field, must):
        raise SentenceTransformersConfigError(f"{path}: '{field}' must be {must}, got {cfg[field]!r}")

    for field, value in cfg.items():
        if field.startswith("pooling_mode_") and type(value) is not bool:
            refuse(field, "true or false")
    if "pooling_mode" in cfg:
        mode = cfg["pooling_mode"]
        if not (isinstance(mode, str) or (isinstance(mode, list) and mode and all(isinstance(m, str) for m in mode))):
            refuse("pooling_mode", "a pooling mode name or a list of them")
    for field in ("word_embedding_dimension", "embedding_dimension"):
        if field in cfg:
            if type(cfg[field]) is not int or cfg[field] <= 0:
                refuse(field, "a positive integer")
            if width is not None and cfg[field] != width:
                refuse(field, f"the model's hidden size {width}")
    if "include_prompt" in cfg and type(cfg["include_prompt"]) is not bool:
        refuse("include_prompt", "true or false")


def check_sentence_bert_config(transformer_dir: str, cfg=None) -> None:
    """sentence_bert_config.json (the Transformer module's options), if there is one: ``max_seq_length``
    an integer the model has positions for (or null), ``do_lower_case`` true/false. ``cfg``: the
    module's config.json, if already read (its positions bound ``max_seq_length``)."""
    path = os.path.join(transformer_dir, "sentence_bert_config.json")
    if not os.path.isfile(path):
        return
    st = _read_json(path)
    if not isinstance(st, dict):
        raise SentenceTransformersConfigError(f"{path}: must be a JSON object of options, got a {type(st).__name__}")
    if cfg is None and os.path.isfile(os.path.join(transformer_dir, "config.json")):
        cfg = _read_json(os.path.join(transformer_dir, "config.json"))
    positions = cfg.get("max_position_embeddings") if isinstance(cfg, dict) else None
    if type(positions) is int and cfg.get("model_type") in ("roberta", "xlm-roberta", "camembert"):
        positions -= 2  # the padding index and the one before it: RoBERTa's positions start at 2
    if type(positions) is not int or positions <= 0:
        positions = None
    length = st.get("max_seq_length")
    if length is not None:
        if type(length) is not int:
            raise SentenceTransformersConfigError(f"{path}: 'max_seq_length' must be an integer, got {length!r}")
        limit = positions or 65536
        if not 1 <= length <= limit:
            raise SentenceTransformersConfigError(
                f"{path}: 'max_seq_length' is {length}, outside 1..{limit}"
                + (f" (the model has {positions} positions)" if positions else ""))
    if "do_lower_case" in st and type(st["do_lower_case"]) is not bool:
        raise SentenceTransformersConfigError(f"{path}: 'do_lower_case' must be true or false, "
                                              f"got {st['do_lower_case']!r}")


def sentence_head(model_dir: str) -> Dict[str, object]:
    """What the model is, recorded in the checkpoint so that training, embedding and export keep it:
    a sentence-transformers model (modules.json) records its pooling and whether it normalises
    (a Normalize module); any other model is a pre-trained encoder with no sentence head of its own,
    recorded with the pooling it is given (no pooling config: mean, sentence-transformers' default).
    Either keeps what its sentence-transformers files say about the input (:func:`input_settings`)."""
    modules = _st_modules(model_dir)
    if len(modules) < 2:
        head = {"pretrained_kind": "encoder", "pretrained_pooling": sentence_pooling(model_dir)}
    else:
        head = {"pretrained_kind": "sentence-embedding", "pretrained_pooling": sentence_pooling(model_dir)}
        layers = [spec for spec, _ in read_dense(model_dir)]
        if layers:
            head["sentence_dense"] = dense_modules.word(layers)
        if modules[-1]["type"].endswith(".Normalize"):
            head["sentence_normalize"] = True
        if _pooling_config(model_dir).get("include_prompt") is False:
            head["sentence_exclude_prompt"] = True  # the default prompt's tokens are not pooled
    head.update(input_settings(model_dir))
    return head


def _pooling_config(model_dir: str) -> dict:
    """The Pooling module's config.json ({} without one), already checked by :func:`sentence_pooling`."""
    modules = _st_modules(model_dir)
    path = os.path.join(model_dir, modules[1].get("path", "") if len(modules) > 1 else "1_Pooling", "config.json")
    return _read_json(path) if os.path.isfile(path) else {}


#: the keys of a Dense module's config.json, as sentence-transformers writes them, with what each may hold
DENSE_KEYS = ("in_features", "out_features", "bias", "activation_function", "module_input_name",
              "module_output_name", "use_residual")


def read_dense(model_dir: str) -> List[tuple]:
    """``[(DenseSpec, {"linear.weight": ..., "linear.bias": ...})]`` of the folder's Dense modules, in order.
    Each config.json is checked before its weights are read: the activation one of the table
    (``models.dense.DENSE_ACTIVATIONS``, by the class path sentence-transformers writes; nothing in the
    file picks code), the sizes positive, bounded and chained from the pooled width, the weights' shapes
    (read from the file's header, nothing allocated) exactly those sizes."""
    cfg = _read_json_object(os.path.join(model_dir, "config.json"), "model options")
    width = cfg.get("hidden_size")
    out = []
    for m in _st_modules(model_dir)[2:]:
        if not m["type"].endswith(".Dense"):
            continue
        folder = os.path.join(model_dir, m.get("path", ""))
        path = os.path.join(folder, "config.json")
        if not os.path.isfile(path):
            raise ImportHfError(f"{os.path.join(model_dir, 'modules.json')}: the module '{m['type']}' has no {path}")
        config = _read_json_object(path, "Dense options")
        unknown = sorted(set(config) - set(DENSE_KEYS))
        if unknown:
            raise ImportHfError(f"{path}: Dense option(s) {', '.join(unknown)} have no counterpart here")

        def refuse(field, must):
            raise SentenceTransformersConfigError(f"{path}: '{field}' must be {must}, got {config.get(field)!r:.80}")

        # sentence-transformers' default activation when the key is absent: Tanh
        activation = dense_modules.from_st_name(config.get("activation_function", dense_modules.st_name("tanh")))
        if activation is None:
            refuse("activation_function", "one of " + ", ".join(map(dense_modules.st_name, dense_modules.DENSE_ACTIVATIONS)))
        for field in ("in_features", "out_features"):
            if type(config.get(field)) is not int or not 1 <= config[field] <= dense_modules.MAX_WIDTH:
                refuse(field, f"an integer in 1..{dense_modules.MAX_WIDTH}")
        if config["in_features"] != width:
            refuse("in_features", f"the width of the vector before it, {width}")
        if type(config.get("bias", True)) is not bool:
            refuse("bias", "true or false")
        if config.get("use_residual", False) is not False:
            refuse("use_residual", "false (a residual Dense has no counterpart here)")
        for field in ("module_input_name", "module_output_name"):
            if config.get(field) not in (None, "sentence_embedding"):
                refuse(field, "'sentence_embedding' (the sentence vector)")
        spec = dense_modules.DenseSpec(config["out_features"], activation, config.get("bias", True))
        want = {k.split(".", 2)[2]: v for k, v in dense_modules.shapes([spec], width).items()}  # linear.*
        where, found = weight_shapes(folder)  # the header only: a size is refused before it is allocated
        if found != want:
            raise ImportHfError(f"{where}: the Dense weights are {found}, its config.json says {want}")
        weights = read_weights(folder)
        out.append((spec, {k: weights[k].float() for k in want}))
        width = spec.out_features
    return out


def input_settings(model_dir: str) -> Dict[str, object]:
    """The model options that keep what sentence-transformers does to a sentence before the encoder:
    sentence_bert_config.json's ``max_seq_length`` (else, as sentence-transformers 6 saves it, the
    tokenizer's ``model_max_length``), kept when below the model's positions, and ``do_lower_case``
    (sentence-transformers 6 saves it as a Lowercase step of tokenizer.json, which transformers 5 drops
    on loading some tokenizers: the import's check against encode() shows what the source does); the
    prompts and default prompt (config_sentence_transformers.json) as one word, ``--sentence-prompts``;
    its ``similarity_fn_name``."""
    out, st, tokenizer = {}, {}, {}
    path = os.path.join(model_dir, "sentence_bert_config.json")
    if os.path.isfile(path):  # its types were checked by check_sentence_bert_config
        st = _read_json(path)
    path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.isfile(path):
        tokenizer = _read_json_object(path, "tokenizer options")
    length = st.get("max_seq_length")
    if length is None and type(tokenizer.get("model_max_length")) is int:
        length = tokenizer["model_max_length"]
    config = _read_json_object(os.path.join(model_dir, "config.json"), "model options")
    positions = config.get("max_position_embeddings")
    if type(positions) is int and config.get("model_type") != "bert":
        positions -= 2  # RoBERTa's positions start at 2
    if length is not None and type(positions) is int and 0 < length < positions:
        out["sentence_max_length"] = length
    if st.get("do_lower_case"):
        out["sentence_lowercase"] = True
    path = os.path.join(model_dir, "config_sentence_transformers.json")
    if os.path.isfile(path):
        st = _read_json_object(path, "sentence-transformers options")
        prompts, name = source_prompts(path, st)
        if any(prompts.values()):  # one word (models.inference.prompts_word); sentence-transformers 6 saves empty ones
            out["sentence_prompts"] = prompts_word(prompts, name)
        similarity = st.get("similarity_fn_name")
        if similarity not in (None, "cosine") and similarity not in SIMILARITY_FUNCTIONS:
            raise ImportHfError(f"{path}: similarity_fn_name {similarity!r} is not one of "
                                f"{', '.join(SIMILARITY_FUNCTIONS)}")
        if similarity not in (None, "cosine"):
            out["sentence_similarity"] = similarity  # the hub's similarity() and search() score with it; the export writes it back
    return out


def source_prompts(path: str, st: dict):
    """``(prompts, default prompt name)`` of config_sentence_transformers.json (``st``, read from ``path``),
    checked as sentence-transformers uses them: a dict of str, and a default that names one of them."""
    prompts, name = st.get("prompts") or {}, st.get("default_prompt_name")
    if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
        raise ImportHfError(f"{path}: 'prompts' must be an object of prompt name -> text, got {prompts!r:.80}")
    if name is not None and name not in prompts:
        raise ImportHfError(f"{path}: default_prompt_name {name!r} is not one of its prompts "
                            f"({', '.join(map(repr, prompts)) or 'none'})")
    return prompts, name


def model_options(cfg, pooling, head=None) -> Dict[str, object]:
    """The fairseq-train model options that rebuild this encoder (also stored in the checkpoint)."""
    max_positions = cfg["max_position_embeddings"] - (2 if cfg["model_type"] != "bert" else 0)
    return {
        "encoder_layers": cfg["num_hidden_layers"],
        "encoder_embed_dim": cfg["hidden_size"],
        "encoder_ffn_embed_dim": cfg["intermediate_size"],
        "encoder_attention_heads": cfg["num_attention_heads"],
        "max_positions": max_positions,
        "activation_fn": ACTIVATIONS[cfg.get("hidden_act", "gelu")],
        # transformers' BertConfig, RobertaConfig and XLMRobertaConfig all default to 1e-12
        "layernorm_eps": float(cfg.get("layer_norm_eps", 1e-12)),
        "dropout": float(cfg.get("hidden_dropout_prob", 0.1)),
        "attention_dropout": float(cfg.get("attention_probs_dropout_prob", 0.1)),
        "sentence_pooling": pooling,
        **(head or {}),
    }


def fairseq_args(options) -> str:
    return " ".join(f"--{k.replace('_', '-')}" if v is True else f"--{k.replace('_', '-')} {v}"
                    for k, v in options.items() if v is not False)


#: the deprecation warnings of hydra >= 1.1 that fairseq's convert_namespace_to_omegaconf raises
HYDRA_DEPRECATIONS = (r"\s*(hydra\.experimental\.\w+\(\) is no longer experimental|The version_base parameter is "
                      r"not specified|In 'config': Usage of deprecated keyword in package header|'config' is "
                      r"validated against ConfigStore schema|The strict flag in the compose API is deprecated)")


def _checkpoint_cfg(options, out_dir):
    """A complete fairseq config, as fairseq-train would save it (task masked_lm, arch clear_roberta)."""
    from fairseq import options as fairseq_options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    parser = fairseq_options.get_training_parser()
    argv = [out_dir, "--task", "masked_lm", "--arch", "clear_roberta", "--criterion", "masked_lm",
            "--tokens-per-sample", str(options["max_positions"]), "--cpu"]
    for k, v in options.items():
        argv += [f"--{k.replace('_', '-')}"] if v is True else [f"--{k.replace('_', '-')}", str(v)]
    args = fairseq_options.parse_args_and_arch(parser, argv)
    with warnings.catch_warnings():
        # fairseq builds its config with hydra's deprecated API: ~20 lines a user cannot act on
        warnings.filterwarnings("ignore", message=HYDRA_DEPRECATIONS, category=UserWarning)
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

    if not 0 < tolerance < math.inf:  # nan would pass every comparison: the check switched off
        raise ImportHfError(f"--tolerance must be finite and > 0, got {tolerance}")
    model_dir = os.path.abspath(os.path.expanduser(str(model_dir)))
    if not os.path.isdir(model_dir):
        raise ImportHfError(f"model directory '{model_dir}' does not exist")
    check_output_dir(out_dir, overwrite, option="OUT_DIR", what="import")  # before any work
    cfg = read_config(model_dir)
    check_hf_sizes(model_dir, cfg)  # nothing is built from config.json that its weights do not hold
    pooling = sentence_pooling(model_dir)  # refuses what sentence-transformers adds beyond the encoder
    check_sentence_bert_config(model_dir, cfg)
    sentence = sentence_head(model_dir)  # its Dense configs checked before any weight is read
    rows, symbols = vocabulary_layout(model_dir, cfg["model_type"])
    enc, head = _strip(read_weights(model_dir), cfg["model_type"])
    where = model_dir
    check_lm_head(enc, head, cfg, where)
    state, has_head = convert_state(enc, head, cfg, rows, where)
    for i, (_, weights) in enumerate(read_dense(model_dir)):  # the model's sentence_dense (models/dense.py)
        state.update({f"sentence_dense.layers.{i}.{k}": v for k, v in weights.items()})
    options = model_options(cfg, pooling, sentence)
    logger.info("import: %s", describe(options))
    with staged_output(out_dir, overwrite=overwrite, option="OUT_DIR", what="import") as staging:
        with open(os.path.join(staging, "dict.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{s} 1\n" for s in symbols)
        tokenizer = _copy_tokenizer(model_dir, cfg["model_type"], staging, symbols)
        # do_lower_case in the tokenizer's record: data prepared with --tokenizer-from is lower-cased as served
        tokenizer.sentence_lowercase = bool(options.get("sentence_lowercase"))
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
                f"verification failed: the imported model differs from transformers' features or "
                f"sentence-transformers' encode() by {difference:.2e} (> {tolerance:g}) on the check sentences; "
                f"nothing was written to '{out_dir}'"
            )
        manifest = sorted(os.listdir(staging))
    return {"model_type": cfg["model_type"], "tokenizer": tokenizer.kind, "rows": len(rows),
            "lm_head": has_head, "max_difference": difference, "files": manifest, "options": options}


def describe(options) -> str:
    """One line saying what was imported (the record training, embedding and export keep)."""
    size = (f"{options['encoder_layers']} layers x {options['encoder_embed_dim']} "
            f"({options['encoder_attention_heads']} heads)")
    if options.get("pretrained_kind") != "sentence-embedding":
        pooling = options.get("pretrained_pooling") or options["sentence_pooling"]
        given = (f"no pooling config: {pooling}, sentence-transformers' default" if pooling == NO_POOLING_CONFIG
                 else f"{pooling} pooling (its 1_Pooling/config.json)")
        return (f"a pre-trained encoder of {size}, no sentence head of its own; {given} (training, "
                "embed()/clear-embed and clear-export-hf use it unless told otherwise)")
    return (f"a sentence-embedding model of {size}: {options['pretrained_pooling']} pooling"
            + (f", Dense {options['sentence_dense']}" if options.get("sentence_dense") else "")
            + (", unit-length vectors (Normalize)" if options.get("sentence_normalize") else "")
            + (f", sentences of at most {options['sentence_max_length']} tokens"
               if options.get("sentence_max_length") else "")
            + (", lower-cased" if options.get("sentence_lowercase") else "")
            + (f", {options['sentence_similarity']} similarity" if options.get("sentence_similarity") else "")
            + _prompts_note(options.get("sentence_prompts"))
            + (", its prompt's tokens left out of the pooling" if options.get("sentence_exclude_prompt") else "")
            + "; training, embed()/clear-embed and clear-export-hf keep them unless told otherwise")


def _prompts_note(word) -> str:
    from ..models.inference import read_prompts_word

    prompts, name = read_prompts_word(word)
    return ((f", the prompts {', '.join(map(repr, prompts))}" if prompts else "")
            + (f" (default {name!r}: {prompts[name]!r} before every sentence)" if name else ""))


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' load report and progress bar off: the report lists the LM head and pooler that
    AutoModel leaves out (expected: only the last hidden states are compared)."""
    from transformers.utils import logging as hf_logging

    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()


CHECK_SENTENCES = ["A man is playing a guitar.", "", "Ünïcödé accents, emoji 🙂 and numbers 12,345.67!",
                   "supercalifragilisticexpialidocious antidisestablishmentarianism"]


def verify(model_dir, staged_dir, cfg, sentences=CHECK_SENTENCES):
    """Largest |difference| of last-layer features, ours vs transformers' (None without transformers)."""
    try:
        from transformers import AutoConfig, AutoModel, AutoTokenizer
    except ImportError:
        return None
    from ..models.hub_interface import from_pretrained

    hub = from_pretrained(staged_dir, "model.pt", ".")
    # transformers reads these files too, and fails on a wrong type with no file name
    for name, what in (("tokenizer_config.json", "tokenizer options"), ("special_tokens_map.json", "special tokens")):
        if os.path.isfile(os.path.join(model_dir, name)):
            _read_json_object(os.path.join(model_dir, name), what)
    try:
        from huggingface_hub.errors import StrictDataclassError  # config field types (transformers >= 5)
    except ImportError:
        StrictDataclassError = TypeError
    try:
        config = AutoConfig.from_pretrained(model_dir)
    except (TypeError, ValueError, StrictDataclassError) as e:
        raise ImportHfError(f"{os.path.join(model_dir, 'config.json')}: transformers refuses it: {_one_line(e)}") from None
    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
    except (TypeError, ValueError, AttributeError, KeyError, OSError) as e:
        raise ImportHfError(
            f"{model_dir}: transformers cannot read its tokenizer files (tokenizer.json, tokenizer_config.json, "
            f"special_tokens_map.json, vocab files): {type(e).__name__}: {_one_line(e)}"
        ) from None
    with _quiet_transformers():
        ref = AutoModel.from_pretrained(model_dir, config=config).eval()
    worst = 0.0
    with torch.no_grad():
        for s in sentences:
            ids = hub.tokenizer.encode([s])[0]
            ours = hub.model.sentence_features(ids.unsqueeze(0))[0]
            batch = tok(s.lower() if hub.lowercase else s, return_tensors="pt")  # the record lower-cases as encode()
            if batch["input_ids"].size(1) != ids.numel():
                raise ImportHfError(f"verification failed: {len(ids)} tokens for {s!r}, transformers "
                                    f"gives {batch['input_ids'].size(1)}")
            theirs = ref(**batch).last_hidden_state[0]
            worst = max(worst, float((ours - theirs).abs().max()))
    return max(worst, encode_difference(model_dir, hub, sentences + ENCODE_CHECK_SENTENCES))


#: beyond CHECK_SENTENCES, for sentence-transformers' encode(): longer than any max_seq_length, capitals
ENCODE_CHECK_SENTENCES = [" ".join(["The quick brown fox jumps over the lazy dog."] * 45),
                          "A Capitalised Sentence About Zürich And The BBC."]


def encode_difference(model_dir, hub, sentences) -> float:
    """Largest |difference| between the imported model's embed() and sentence-transformers' own encode() of
    ``model_dir`` (0 without sentence-transformers): its pooling, Normalize, max_seq_length and
    do_lower_case, as the source model has them."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return 0.0
    import numpy as np

    try:  # a folder without modules.json: its "creating one with mean pooling" is what the import recorded
        with _quiet_transformers(), _quiet_loggers("sentence_transformers"):
            st = SentenceTransformer(model_dir, device="cpu", trust_remote_code=False)
    except (TypeError, ValueError, AttributeError, KeyError, OSError) as e:
        raise ImportHfError(f"{model_dir}: sentence-transformers cannot load it to check the import: "
                            f"{type(e).__name__}: {_one_line(e)}") from None
    if not st.max_seq_length or st.max_seq_length > hub.max_length:
        # sentence-transformers would run past the model's positions (a tokenizer without a length of its
        # own: it caps at max_position_embeddings, two more than RoBERTa has): only what fits is compared
        tokens = hub.tokenizer.encode_counted(sentence_input(hub.model).texts(sentences))[0]  # prompt included
        sentences = [s for s, t in zip(sentences, tokens) if len(t) <= hub.max_length]
    theirs = st.encode(sentences, convert_to_numpy=True, batch_size=8, show_progress_bar=False)
    with _quiet_loggers(type(hub).__module__):  # the long check sentence is truncated on purpose: no warning
        ours = hub.embed(sentences, batch_size=8)
    return float(np.abs(ours - theirs).max())


@contextlib.contextmanager
def _quiet_loggers(*names):
    """Only errors from these loggers in the block (a check's expected warnings are not the user's)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)
