"""Tokenizers as one concept: sentencepiece, GPT-2 byte-level BPE and WordPiece.

A tokenizer turns text into *symbols*, the strings of a fairseq ``dict.txt``:

* ``sentencepiece``: pieces (``▁`` starts a word) — our own data, XLM-R;
* ``gpt2``: GPT-2 encoder ids as strings, the layout of fairseq's roberta.base
  (``encoder.json`` + ``vocab.bpe``; ``Ġ`` starts a word), also what
  ``clear-import-hf`` writes for a Hugging Face RoBERTa;
* ``bert``: WordPiece tokens (``##`` continues a word) — BERT, MiniLM, SBERT.

Each knows its word boundaries (for ``subs``) and the fairseq ``--bpe`` options
that name it, and :func:`detect` finds the tokenizer of a model or data
directory. :class:`DictionaryEncoder` maps a tokenizer's ids to a dictionary's
through one lookup table, for the hub, clear-embed, STS evaluation and
clear-prepare.

A directory made by clear-prepare or clear-import-hf records its tokenizer in
``clear_tokenizer.json`` (kind, files and their SHA-256, and the dictionary's),
so that a data directory and a model made with different tokenizers are told
apart even when their dictionaries have the same size.
"""

import abc
import hashlib
import json
import os
import shutil
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from .errors import FairseqClearError

KINDS = ("sentencepiece", "gpt2", "bert")
RECORD = "clear_tokenizer.json"
SP_WORD_START = "\u2581"
GPT2_WORD_START = "\u0120"  # 'Ġ', GPT-2's byte-level form of a space
WORDPIECE_CONTINUATION = "##"
#: the dictionary contract: dict.txt's symbols follow fairseq's four specials, and a
#: task appends <mask> (fairseq's masked_lm) then [DEL] (CLEAR's deletions), in this order
MASK_SYMBOL = "<mask>"
DEL_SYMBOL = "[DEL]"
APPENDED_SYMBOLS = (MASK_SYMBOL, DEL_SYMBOL)
#: fairseq's special symbols and BERT's tokens for the same roles
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", MASK_SYMBOL)
BERT_SPECIALS = ("[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]")


class TokenizerError(FairseqClearError, ValueError):
    """A tokenizer cannot be found or used; the message names the file or directory."""


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _safe_text(sentences: Sequence[str]) -> List[str]:
    # a lone surrogate (text decoded with errors="surrogateescape") is not UTF-8
    return [s.encode("utf-8", "replace").decode("utf-8") for s in sentences]


class Tokenizer(abc.ABC):
    """Text -> ids in the tokenizer's own vocabulary, and those ids' dictionary symbols."""

    kind = ""
    files: Dict[str, str] = {}
    #: whether a sentence's first word has other symbols than the same word inside it
    initial_words_differ = False

    @abc.abstractmethod
    def encode_ids(self, sentences: Sequence[str]) -> List[List[int]]:
        """The tokenizer's ids of each sentence (no special tokens added)."""

    @abc.abstractmethod
    def symbols(self) -> List[str]:
        """The dictionary symbol of each of the tokenizer's ids (position = id)."""

    def unknown_ids(self) -> List[int]:
        return []

    def special_symbols(self) -> Dict[int, str]:
        """The tokenizer's ids of special tokens -> fairseq's symbol for them ([CLS] -> <s>, ...)."""
        return {}

    @abc.abstractmethod
    def is_word_start(self, symbol: str) -> bool:
        """Whether the dictionary symbol begins a word (``subs`` replaces whole words)."""

    def word_symbols(self, word: str, initial: bool = False) -> List[str]:
        """``word`` as dictionary symbols, as it reads inside a sentence (or at its start)."""
        table = self.symbols()
        return [table[i] for i in self.encode_ids([word if initial else " " + word])[0]]

    def tokenize(self, sentences: Sequence[str]) -> List[List[str]]:
        table = self.symbols()
        return [[table[i] for i in ids] for ids in self.encode_ids(sentences)]

    @abc.abstractmethod
    def fairseq_bpe(self) -> dict:
        """fairseq's --bpe options for this tokenizer (the hub's encode()/decode() use them)."""

    def record(self, dictionary_path: Optional[str] = None) -> dict:
        rec = {"kind": self.kind, "files": {role: os.path.basename(p) for role, p in self.files.items()},
               "sha256": {role: sha256(p) for role, p in self.files.items()}}
        rec.update(self.options())
        if dictionary_path:
            rec["dictionary_sha256"] = sha256(dictionary_path)
        return rec

    def options(self) -> dict:
        return {}

    def describe(self) -> str:
        return f"{self.kind} ({', '.join(self.files.values())})"


class SentencepieceTokenizer(Tokenizer):
    """A sentencepiece model; ids are its own.

    With a Hugging Face ``tokenizer.json`` converted from it (an imported XLM-R), text
    is encoded by that and ids are Hugging Face's, so the ids equal XLM-R's tokenizer
    on every input (literal ``<mask>`` text, very long words).
    """

    kind = "sentencepiece"

    def __init__(self, model_path: str, tokenizer_json: Optional[str] = None):
        import sentencepiece as spm

        if not os.path.isfile(model_path):
            raise TokenizerError(f"sentencepiece model '{model_path}' does not exist")
        self.files = {"model": os.path.abspath(model_path)}
        self.path = self.files["model"]
        self.sp = spm.SentencePieceProcessor(model_file=model_path)
        self._symbols = None
        self.fast = None
        if tokenizer_json:
            self.files["tokenizer_json"] = os.path.abspath(tokenizer_json)
            self.fast = _load_fast(tokenizer_json, {}, model_path)
            vocab = self.fast.get_vocab()
            self._symbols = [""] * (max(vocab.values()) + 1)
            for token, i in vocab.items():
                self._symbols[i] = token
            if any(self.sp.piece_to_id(t) == self.sp.unk_id() for t in self._symbols
                   if t and t not in FAIRSEQ_SPECIALS and t != "<pad>"):
                raise TokenizerError(f"'{tokenizer_json}' holds tokens that '{model_path}' lacks")

    def encode_ids(self, sentences):
        sentences = list(sentences)
        if not sentences:
            return []
        if self.fast is not None:
            return [e.ids for e in self.fast.encode_batch(_safe_text(sentences), add_special_tokens=False)]
        try:
            return self.sp.encode(sentences)
        except TypeError:
            return self.sp.encode(_safe_text(sentences))

    def symbols(self):
        if self._symbols is None:
            self._symbols = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        return self._symbols

    def unknown_ids(self):
        if self.fast is not None:
            return [i for i, t in enumerate(self.symbols()) if t == "<unk>"]
        return [self.sp.unk_id()]

    def special_symbols(self):
        if self.fast is None:
            return {}
        return {i: t for i, t in enumerate(self.symbols()) if t in FAIRSEQ_SPECIALS}

    def control_ids(self):
        if self.fast is not None:
            return list(self.special_symbols())
        return [i for i in range(self.sp.get_piece_size()) if self.sp.is_control(i) or self.sp.is_unknown(i)]

    def is_word_start(self, symbol):
        return symbol.startswith(SP_WORD_START)

    def word_symbols(self, word, initial=False):
        if self.fast is not None:
            return super().word_symbols(word, initial=True)
        return self.sp.encode(word, out_type=str)  # sentencepiece marks every word alike

    def fairseq_bpe(self):
        return {"bpe": "sentencepiece", "sentencepiece_model": self.path}


class Gpt2Tokenizer(Tokenizer):
    """fairseq's ``gpt2`` bpe on local files; symbols are encoder ids, as in roberta.base's dict.txt.

    With a Hugging Face ``tokenizer.json`` over the same vocabulary (an imported RoBERTa),
    text is encoded by it, so that literal special tokens in the text (``<mask>``) are
    read as Hugging Face reads them; fairseq's own files encode them as text.
    """

    kind = "gpt2"
    initial_words_differ = True

    def __init__(self, encoder_json: str, vocab_bpe: str, tokenizer_json: Optional[str] = None):
        from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

        for role, path in (("--gpt2-encoder-json", encoder_json), ("--gpt2-vocab-bpe", vocab_bpe)):
            if not os.path.isfile(path):
                raise TokenizerError(f"{role}: GPT-2 BPE file '{path}' does not exist")
        self.files = {"encoder_json": os.path.abspath(encoder_json), "vocab_bpe": os.path.abspath(vocab_bpe)}
        try:
            self.bpe = get_encoder(encoder_json, vocab_bpe)
        except (ValueError, UnicodeDecodeError, IndexError) as e:
            raise TokenizerError(f"cannot read GPT-2 BPE files '{encoder_json}', '{vocab_bpe}': {e}") from None
        size = max(self.bpe.encoder.values()) + 1
        self._decoded = [""] * size
        for token, i in self.bpe.encoder.items():
            self._decoded[i] = token
        self.fast = None
        if tokenizer_json:
            self.files["tokenizer_json"] = os.path.abspath(tokenizer_json)
            self.fast = _load_fast(tokenizer_json, self.bpe.encoder, encoder_json)

    def encode_ids(self, sentences):
        if self.fast is not None:
            return [e.ids for e in self.fast.encode_batch(_safe_text(sentences), add_special_tokens=False)]
        return [self.bpe.encode(s) for s in _safe_text(sentences)]

    def symbols(self):
        return [str(i) for i in range(len(self._decoded))]

    def special_symbols(self):
        # a Hugging Face RoBERTa vocab.json holds fairseq's specials as tokens
        return {self.bpe.encoder[t]: t for t in FAIRSEQ_SPECIALS if t in self.bpe.encoder}

    def token(self, symbol: str) -> Optional[str]:
        """The byte-level BPE token of a dict.txt symbol (an encoder id), or None."""
        if symbol.isdigit() and int(symbol) < len(self._decoded):
            return self._decoded[int(symbol)]
        return None

    def is_word_start(self, symbol):
        token = self.token(symbol)
        return token is not None and token.startswith(GPT2_WORD_START)

    def fairseq_bpe(self):
        return {"bpe": "gpt2", "gpt2_encoder_json": self.files["encoder_json"],
                "gpt2_vocab_bpe": self.files["vocab_bpe"]}


class WordpieceTokenizer(Tokenizer):
    """BERT's WordPiece, through the ``tokenizers`` library.

    With the model's ``tokenizer.json`` it is exactly the Hugging Face fast tokenizer;
    with only ``vocab.txt`` it is BERT's basic + WordPiece tokenizer (``lowercase``).
    """

    kind = "bert"

    def __init__(self, vocab_txt: str, lowercase: bool = True, tokenizer_json: Optional[str] = None):
        from tokenizers.implementations import BertWordPieceTokenizer

        if not os.path.isfile(vocab_txt):
            raise TokenizerError(f"WordPiece vocabulary '{vocab_txt}' does not exist")
        self.files = {"vocab": os.path.abspath(vocab_txt)}
        self.lowercase = bool(lowercase)
        if tokenizer_json:
            self.files["tokenizer_json"] = os.path.abspath(tokenizer_json)
        with open(vocab_txt, encoding="utf-8") as f:
            self._symbols = [line.rstrip("\n") for line in f]
        if tokenizer_json:
            self.tok = _load_fast(tokenizer_json, {s: i for i, s in enumerate(self._symbols)}, vocab_txt)
        else:
            self.tok = BertWordPieceTokenizer(vocab_txt, lowercase=self.lowercase)
            self.tok.no_truncation()
            self.tok.no_padding()
        self.unk = self.tok.get_vocab().get("[UNK]")

    def encode_ids(self, sentences):
        return [e.ids for e in self.tok.encode_batch(_safe_text(sentences), add_special_tokens=False)]

    def symbols(self):
        return self._symbols

    def unknown_ids(self):
        return [] if self.unk is None else [self.unk]

    def special_symbols(self):
        index = {s: i for i, s in enumerate(self._symbols)}
        return {index[b]: f for b, f in zip(BERT_SPECIALS, FAIRSEQ_SPECIALS) if b in index}

    def is_word_start(self, symbol):
        return not symbol.startswith(WORDPIECE_CONTINUATION)

    def word_symbols(self, word, initial=False):
        return [self._symbols[i] for i in self.encode_ids([word])[0]]

    def options(self):
        return {"lowercase": self.lowercase}

    def fairseq_bpe(self):
        return {"bpe": "bert", "bpe_vocab_file": self.files["vocab"], "bpe_cased": not self.lowercase}


def copy_to(tokenizer: Tokenizer, directory: str, dictionary_path: Optional[str] = None) -> Tokenizer:
    """Copy ``tokenizer``'s files into ``directory`` (a sentencepiece model as
    ``sentencepiece.model``), write its record there; returns the tokenizer on the copies."""
    names = {}
    for role, path in tokenizer.files.items():
        name = "sentencepiece.model" if role == "model" else os.path.basename(path)
        target = os.path.join(directory, name)
        if os.path.abspath(path) != os.path.abspath(target):
            tmp = target + f".tmp{os.getpid()}"
            shutil.copyfile(path, tmp)
            os.replace(tmp, target)
        names[role] = name
    copied = from_record(directory, dict(tokenizer.record(), files=names))
    write_record(directory, copied, dictionary_path)
    return copied


def _load_fast(tokenizer_json: str, vocab: Dict[str, int], vocab_file: str):
    """A ``tokenizers`` tokenizer from ``tokenizer.json``, checked to number tokens as ``vocab_file``."""
    from tokenizers import Tokenizer as HfTokenizer

    if not os.path.isfile(tokenizer_json):
        raise TokenizerError(f"tokenizer file '{tokenizer_json}' does not exist")
    try:
        tok = HfTokenizer.from_file(tokenizer_json)
    except Exception as e:  # the tokenizers library raises bare Exceptions
        raise TokenizerError(f"cannot read tokenizer file '{tokenizer_json}': {e}") from None
    theirs = tok.get_vocab()
    if any(theirs.get(s, i) != i for s, i in vocab.items()):
        raise TokenizerError(f"'{tokenizer_json}' does not number its tokens as '{vocab_file}' does")
    tok.no_truncation()
    tok.no_padding()
    return tok


def read_record(directory: str) -> Optional[dict]:
    path = os.path.join(directory, RECORD)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerError(f"'{path}' is not a readable tokenizer record: {e}") from None
    if not isinstance(rec, dict) or rec.get("kind") not in KINDS or not isinstance(rec.get("files"), dict):
        raise TokenizerError(f"'{path}': 'kind' must be one of {', '.join(KINDS)} with a 'files' object")
    for name in rec["files"].values():
        if not isinstance(name, str) or os.path.basename(name) != name:
            raise TokenizerError(f"'{path}': file names must be plain names inside the directory, got {name!r}")
    return rec


def write_record(directory: str, tokenizer: Tokenizer, dictionary_path: Optional[str] = None) -> str:
    path = os.path.join(directory, RECORD)
    tmp = path + f".tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(tokenizer.record(dictionary_path), f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path


def from_record(directory: str, rec: dict) -> Tokenizer:
    files = {role: os.path.join(directory, name) for role, name in rec["files"].items()}
    try:
        if rec["kind"] == "sentencepiece":
            return SentencepieceTokenizer(files["model"], files.get("tokenizer_json"))
        if rec["kind"] == "gpt2":
            return Gpt2Tokenizer(files["encoder_json"], files["vocab_bpe"], files.get("tokenizer_json"))
        return WordpieceTokenizer(files["vocab"], rec.get("lowercase", True), files.get("tokenizer_json"))
    except KeyError as e:
        raise TokenizerError(f"'{os.path.join(directory, RECORD)}' names no {e} file for kind '{rec['kind']}'") from None


def _bert_lowercase(directory: str) -> bool:
    cfg = os.path.join(directory, "tokenizer_config.json")
    if os.path.isfile(cfg):
        try:
            with open(cfg, encoding="utf-8") as f:
                options = json.load(f)
        except (OSError, ValueError, RecursionError) as e:  # ValueError: bad JSON or not UTF-8
            raise TokenizerError(f"cannot read '{cfg}': {type(e).__name__}: {e}") from None
        if not isinstance(options, dict):
            raise TokenizerError(f"{cfg}: must be a JSON object of tokenizer options, got a {type(options).__name__}")
        return bool(options.get("do_lower_case", True))
    return True


def detect(directory: str) -> Optional[Tokenizer]:
    """The tokenizer of a model or data directory: its record, else the files it holds."""
    rec = read_record(directory)
    if rec is not None:
        return from_record(directory, rec)
    f = lambda name: os.path.join(directory, name)  # noqa: E731
    if os.path.isfile(f("sentencepiece.model")):
        return SentencepieceTokenizer(f("sentencepiece.model"))
    if os.path.isfile(f("encoder.json")) and os.path.isfile(f("vocab.bpe")):
        tj = f("tokenizer.json") if os.path.isfile(f("tokenizer.json")) else None
        return Gpt2Tokenizer(f("encoder.json"), f("vocab.bpe"), tj)
    if os.path.isfile(f("vocab.txt")):
        tj = f("tokenizer.json") if os.path.isfile(f("tokenizer.json")) else None
        return WordpieceTokenizer(f("vocab.txt"), _bert_lowercase(directory), tj)
    return None


LOOKED_FOR = f"{RECORD}, sentencepiece.model, encoder.json + vocab.bpe (GPT-2 BPE) or vocab.txt (WordPiece)"


def find(directory: str, option: str, sentencepiece_model: Optional[str] = None) -> Tokenizer:
    """The tokenizer for ``option``: ``sentencepiece_model`` when given, else the one in
    ``directory``; a :class:`TokenizerError` naming ``option`` and the path otherwise."""
    if sentencepiece_model:
        if not os.path.isfile(sentencepiece_model):
            raise TokenizerError(f"--sentencepiece-model: '{sentencepiece_model}' does not exist")
        return SentencepieceTokenizer(sentencepiece_model)
    if not os.path.isdir(directory):
        raise TokenizerError(f"{option}: '{directory}' is not a directory")
    try:
        tokenizer = detect(directory)
    except TokenizerError as e:
        raise TokenizerError(f"{option}: {e}") from None
    if tokenizer is None:
        raise TokenizerError(f"{option}: '{directory}' holds no tokenizer: looked for {LOOKED_FOR}")
    return tokenizer


def from_bpe_options(bpe: str, directory: str, **files) -> Tokenizer:
    """The tokenizer of fairseq-style options (bpe='gpt2' with gpt2_encoder_json=..., ...)."""
    f = lambda name: os.path.join(directory, name)  # noqa: E731
    if bpe == "sentencepiece":
        return SentencepieceTokenizer(files.get("sentencepiece_model") or f("sentencepiece.model"))
    if bpe == "gpt2":
        return Gpt2Tokenizer(files.get("gpt2_encoder_json") or f("encoder.json"),
                             files.get("gpt2_vocab_bpe") or f("vocab.bpe"))
    if bpe == "bert":
        vocab = files.get("bpe_vocab_file") or f("vocab.txt")
        cased = files.get("bpe_cased")
        lowercase = _bert_lowercase(os.path.dirname(vocab)) if cased is None else not cased
        tj = os.path.join(os.path.dirname(vocab), "tokenizer.json")
        return WordpieceTokenizer(vocab, lowercase, tj if os.path.isfile(tj) else None)
    raise TokenizerError(f"bpe='{bpe}': choose one of {', '.join(KINDS)}")


def check_same(data_dir: str, model_dir: str) -> None:
    """Refuse a data directory and a model directory whose records name different tokenizers."""
    a, b = read_record(data_dir), read_record(model_dir)
    if a is None or b is None or os.path.abspath(data_dir) == os.path.abspath(model_dir):
        return
    same = a["kind"] == b["kind"] and a.get("sha256") == b.get("sha256") and (
        a.get("dictionary_sha256") == b.get("dictionary_sha256")
        or None in (a.get("dictionary_sha256"), b.get("dictionary_sha256")))
    if not same:
        raise TokenizerError(
            f"the data in '{data_dir}' was made by tokenizer {_summary(a)} but the model in "
            f"'{model_dir}' by {_summary(b)} ({RECORD} of each); prepare the data with "
            f"clear-prepare --tokenizer-from {model_dir}"
        )


def _summary(rec: dict) -> str:
    digest = ",".join(v[:8] for v in sorted((rec.get("sha256") or {}).values()))
    return f"{rec['kind']} [{digest}]"


class DictionaryEncoder:
    """Sentences -> ``<s> symbols </s>`` dictionary ids, truncated to ``max_positions``.

    The tokenizer's ids map to dictionary ids through one lookup table built from
    the symbols themselves, so a whole list is tokenised in one call and gives the
    ids of fairseq's bpe + ``Dictionary.encode_line`` path.
    """

    def __init__(self, tokenizer: Tokenizer, dictionary):
        self.tokenizer = tokenizer
        self.path = next(iter(tokenizer.files.values()))
        self.dictionary = dictionary
        self.bos, self.eos = dictionary.bos(), dictionary.eos()
        self.lookup = np.array([dictionary.index(s) for s in tokenizer.symbols()], dtype=np.int64)
        for i in tokenizer.unknown_ids():
            self.lookup[i] = dictionary.unk()
        for i, symbol in tokenizer.special_symbols().items():
            self.lookup[i] = dictionary.index(symbol)
        self.num_truncated = 0

    def foreign_share(self) -> float:
        """Share of dict.txt's own symbols that the tokenizer never produces. A dict.txt made from
        text this tokenizer encoded has almost none (sentencepiece writes characters it cannot
        encode as they are: up to 2% measured); one of another tokenizer has many."""
        known = set(self.tokenizer.symbols())
        d = self.dictionary
        own = [d[i] for i in range(d.nspecial, len(d))
               if d[i] not in APPENDED_SYMBOLS and not d[i].startswith("madeupword")]
        return sum(1 for s in own if s not in known) / max(len(own), 1)

    def missing_share(self) -> float:
        """Share of the tokenizer's symbols that dict.txt lacks (they become <unk>, as in training)."""
        skip = set(self.tokenizer.unknown_ids()) | set(self.tokenizer.special_symbols())
        if hasattr(self.tokenizer, "control_ids"):
            skip |= set(self.tokenizer.control_ids())
        symbols = self.tokenizer.symbols()
        normal = [i for i in range(len(symbols)) if i not in skip and symbols[i]]
        unk = self.dictionary.unk()
        return sum(1 for i in normal if self.lookup[i] == unk) / max(len(normal), 1)

    def encode(self, sentences: Sequence[str], max_positions: Optional[int] = None) -> List[torch.Tensor]:
        out, self.num_truncated = self.encode_counted(sentences, max_positions)
        return out

    def encode_counted(self, sentences: Sequence[str], max_positions: Optional[int] = None):
        """(one LongTensor per sentence, how many were truncated to ``max_positions``)."""
        body_limit = None if max_positions is None else max_positions - 2
        out, truncated = [], 0
        for pieces in self.tokenizer.encode_ids(list(sentences)):
            if body_limit is not None and len(pieces) > body_limit:
                pieces = pieces[:body_limit]
                truncated += 1
            tokens = np.empty(len(pieces) + 2, dtype=np.int64)
            tokens[0], tokens[-1] = self.bos, self.eos
            tokens[1:-1] = self.lookup[np.asarray(pieces, dtype=np.int64)]
            out.append(torch.from_numpy(tokens))
        return out, truncated
