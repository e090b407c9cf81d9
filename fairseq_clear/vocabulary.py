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
import functools
import hashlib
import json
import os
import shutil
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from .atomic_files import atomic_path, atomic_write
from .errors import FairseqClearError

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


#: kind -> tokenizer class: every subclass of :class:`Tokenizer` that names its ``kind``
TOKENIZERS: Dict[str, type] = {}


def kinds() -> tuple:
    """The tokenizer kinds (also fairseq's ``--bpe`` names): those of the tokenizer classes."""
    return tuple(TOKENIZERS)


def _lowercasing(encode_ids):
    """``encode_ids`` that lower-cases the texts first when the tokenizer's ``sentence_lowercase`` is set
    (sentence-transformers' do_lower_case: the text, not only the tokenizer's own normaliser)."""
    @functools.wraps(encode_ids)
    def encode(self, sentences):
        if self.sentence_lowercase:
            sentences = [s.lower() if isinstance(s, str) else s for s in sentences]
        return encode_ids(self, sentences)

    return encode


class Tokenizer(abc.ABC):
    """Text -> ids in the tokenizer's own vocabulary, and those ids' dictionary symbols.

    A subclass that sets ``kind`` (its name in ``clear_tokenizer.json``, also fairseq's
    ``--bpe`` name) is a tokenizer of its own: it is registered in :data:`TOKENIZERS`, read
    back from its record (:meth:`from_files`), found in a directory (:meth:`find_in`),
    accepted in a checkpoint's config and exported to Hugging Face through its ``hf_*``
    members, with no other edit.
    """

    kind = ""
    #: lower-case every text before encoding it (its record's ``sentence_lowercase``: an imported
    #: sentence-transformers model's do_lower_case), so prepared data reads as the model serves
    sentence_lowercase = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("kind"):
            TOKENIZERS[cls.kind] = cls
        if "encode_ids" in cls.__dict__:  # every subclass's encoding lower-cases when its record says so
            cls.encode_ids = _lowercasing(cls.__dict__["encode_ids"])
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
        if self.sentence_lowercase:
            rec["sentence_lowercase"] = True
        if dictionary_path:
            rec["dictionary_sha256"] = sha256(dictionary_path)
        return rec

    def options(self) -> dict:
        return {}

    def describe(self) -> str:
        return f"{self.kind} ({', '.join(self.files.values())})"

    # ---- where it is found: a record, a directory, fairseq's options ----------------------
    #: role -> the name its file has in a directory the tokenizer is copied into (default: its own)
    directory_names: Dict[str, str] = {}
    #: what :meth:`find_in` looks for, in words (for the error that names what was looked for)
    looks_for = ""

    @classmethod
    def from_files(cls, files: Dict[str, str], options: dict) -> "Tokenizer":
        """The tokenizer on ``files`` (role -> path) with the options of its record; a
        ``KeyError`` names a role that is missing."""
        raise NotImplementedError

    @classmethod
    def find_in(cls, directory: str) -> Optional["Tokenizer"]:
        """The tokenizer made from the files ``directory`` holds (no record), or None."""
        return None

    @classmethod
    def from_bpe_options(cls, directory: str, **files) -> "Tokenizer":
        """The tokenizer of fairseq's ``--bpe`` options (e.g. gpt2_encoder_json=...); the files
        not given are looked for in ``directory`` (default: the one :meth:`find_in` finds there)."""
        found = cls.find_in(directory)
        if found is None:
            raise TokenizerError(f"bpe='{cls.kind}': '{directory}' holds no {cls.looks_for or cls.kind}")
        return found

    # ---- its Hugging Face layout (clear-export-hf) -------------------------------------
    #: the Hugging Face architecture a model with this tokenizer is exported as
    #: (``export.hf.convert_model``: "xlm-roberta", "roberta" or "bert"); "" = no export
    hf_architecture = ""
    #: Hugging Face's tokens for fairseq's <s>, <pad>, </s>, <unk>, <mask> in the export
    hf_specials = FAIRSEQ_SPECIALS

    def hf_check(self, dictionary) -> None:
        """Raise ``ExportError`` when the export cannot write this tokenizer for ``dictionary``."""
        if not self.hf_architecture:
            from .errors import ExportError

            raise ExportError(f"the {self.kind} tokenizer ({self.describe()}) has no Hugging Face export")

    def hf_tokenizer(self, dictionary, max_positions: int, work_dir: str):
        """The export's ``transformers`` tokenizer, whose ids are ``dictionary``'s rows, truncating
        at ``max_positions``. Files it writes into ``work_dir`` go into the export too (the files
        fairseq's bpe and clear-import-hf read); :meth:`hf_row_tokens` gives each row's token."""
        raise NotImplementedError

    def hf_files(self) -> Dict[str, str]:
        """Files copied into the export as they are: export name -> path."""
        return {}

    def reads_special_text_as_text(self) -> bool:
        """Whether ``<mask>`` typed in a sentence is text (fairseq's own bpe files read it so);
        the export then makes its tokenizer read it as text too."""
        return False

    def hf_row_token(self, symbol: str) -> str:
        """The Hugging Face token of a dict.txt symbol that is not a special."""
        return symbol

    def hf_row_tokens(self, dictionary) -> List[str]:
        """The Hugging Face token of each dictionary row (row = id): fairseq's specials as
        :attr:`hf_specials`, ``<mask>`` as its mask token, the other symbols by :meth:`hf_row_token`."""
        tokens = list(self.hf_specials[:4])
        for row in range(dictionary.nspecial, len(dictionary)):
            symbol = dictionary[row]
            if symbol == APPENDED_SYMBOLS[0]:
                tokens.append(self.hf_specials[4])
            elif symbol in APPENDED_SYMBOLS:
                tokens.append(symbol)
            else:
                tokens.append(self.hf_row_token(symbol))
        return tokens


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
        try:
            self.sp = spm.SentencePieceProcessor(model_file=model_path)
        except (RuntimeError, OSError) as e:  # sentencepiece's "could not parse ModelProto" on a damaged file
            raise TokenizerError(f"cannot read sentencepiece model '{model_path}': "
                                 f"{str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}") from None
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

    directory_names = {"model": "sentencepiece.model"}
    looks_for = "sentencepiece.model"

    @classmethod
    def from_files(cls, files, options):
        return cls(files["model"], files.get("tokenizer_json"))

    @classmethod
    def find_in(cls, directory):
        path = os.path.join(directory, "sentencepiece.model")
        return cls(path) if os.path.isfile(path) else None

    @classmethod
    def from_bpe_options(cls, directory, **files):
        return cls(files.get("sentencepiece_model") or os.path.join(directory, "sentencepiece.model"))

    # XLM-R's layout: dict.txt = sentencepiece ids + 1, <mask> after the pieces
    hf_architecture = "xlm-roberta"

    def hf_check(self, dictionary):
        from .hf_tokenizers import check_sentencepiece_layout

        check_sentencepiece_layout(self.sp, self.path, dictionary)

    def hf_tokenizer(self, dictionary, max_positions, work_dir):
        from .hf_tokenizers import build_tokenizer

        return build_tokenizer(self.path, max_positions)

    def hf_files(self):
        # the sentencepiece model itself, for fairseq-side use and reproducibility
        return {"sentencepiece.bpe.model": self.path}

    def reads_special_text_as_text(self):
        return self.fast is None


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

    looks_for = "encoder.json + vocab.bpe (GPT-2 BPE)"

    @classmethod
    def from_files(cls, files, options):
        return cls(files["encoder_json"], files["vocab_bpe"], files.get("tokenizer_json"))

    @classmethod
    def find_in(cls, directory):
        f = lambda name: os.path.join(directory, name)  # noqa: E731
        if os.path.isfile(f("encoder.json")) and os.path.isfile(f("vocab.bpe")):
            return cls(f("encoder.json"), f("vocab.bpe"), _optional(f("tokenizer.json")))
        return None

    @classmethod
    def from_bpe_options(cls, directory, **files):
        return cls(files.get("gpt2_encoder_json") or os.path.join(directory, "encoder.json"),
                   files.get("gpt2_vocab_bpe") or os.path.join(directory, "vocab.bpe"))

    # RoBERTa's layout: vocab.json + merges.txt re-numbered as dict.txt's rows
    hf_architecture = "roberta"

    def hf_tokenizer(self, dictionary, max_positions, work_dir):
        from .hf_tokenizers import roberta_row_tokenizer

        return roberta_row_tokenizer(self.hf_row_tokens(dictionary), self.files["vocab_bpe"], max_positions,
                                     work_dir)

    def reads_special_text_as_text(self):
        return self.fast is None

    def hf_row_token(self, symbol):
        token = self.token(symbol)
        # fairseq's madeupword fillers and other non-id symbols keep their text
        return token if token is not None else symbol


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

    looks_for = "vocab.txt (WordPiece)"

    @classmethod
    def from_files(cls, files, options):
        return cls(files["vocab"], options.get("lowercase", True), files.get("tokenizer_json"))

    @classmethod
    def find_in(cls, directory):
        vocab = os.path.join(directory, "vocab.txt")
        if not os.path.isfile(vocab):
            return None
        return cls(vocab, _bert_lowercase(directory), _optional(os.path.join(directory, "tokenizer.json")))

    @classmethod
    def from_bpe_options(cls, directory, **files):
        vocab = files.get("bpe_vocab_file") or os.path.join(directory, "vocab.txt")
        cased = files.get("bpe_cased")
        lowercase = _bert_lowercase(os.path.dirname(vocab)) if cased is None else not cased
        return cls(vocab, lowercase, _optional(os.path.join(os.path.dirname(vocab), "tokenizer.json")))

    # BERT's layout: vocab.txt re-numbered as dict.txt's rows
    hf_architecture = "bert"
    hf_specials = BERT_SPECIALS

    def hf_tokenizer(self, dictionary, max_positions, work_dir):
        from .hf_tokenizers import bert_row_tokenizer

        return bert_row_tokenizer(self.hf_row_tokens(dictionary), self.lowercase, max_positions, work_dir)


def copy_to(tokenizer: Tokenizer, directory: str, dictionary_path: Optional[str] = None) -> Tokenizer:
    """Copy ``tokenizer``'s files into ``directory`` (a sentencepiece model as
    ``sentencepiece.model``), write its record there; returns the tokenizer on the copies."""
    names = {}
    for role, path in tokenizer.files.items():
        name = tokenizer.directory_names.get(role) or os.path.basename(path)
        target = os.path.join(directory, name)
        if os.path.abspath(path) != os.path.abspath(target):
            with atomic_path(target) as tmp:
                shutil.copyfile(path, tmp)
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
    except (OSError, ValueError, RecursionError) as e:  # ValueError: not UTF-8 or not JSON; too deep
        raise TokenizerError(f"'{path}' is not a readable tokenizer record: {type(e).__name__}: "
                             f"{str(e)[:200]}") from None
    if not isinstance(rec, dict) or rec.get("kind") not in TOKENIZERS or not isinstance(rec.get("files"), dict):
        raise TokenizerError(f"'{path}': 'kind' must be one of {', '.join(kinds())} with a 'files' object")
    for name in rec["files"].values():
        if not isinstance(name, str) or os.path.basename(name) != name:
            raise TokenizerError(f"'{path}': file names must be plain names inside the directory, got {name!r}")
    return rec


def write_record(directory: str, tokenizer: Tokenizer, dictionary_path: Optional[str] = None) -> str:
    path = os.path.join(directory, RECORD)
    with atomic_write(path) as f:
        json.dump(tokenizer.record(dictionary_path), f, indent=2, sort_keys=True)
        f.write("\n")
    return path


def from_record(directory: str, rec: dict) -> Tokenizer:
    files = {role: os.path.join(directory, name) for role, name in rec["files"].items()}
    options = {k: v for k, v in rec.items()
               if k not in ("kind", "files", "sha256", "dictionary_sha256", "sentence_lowercase")}
    if type(rec.get("sentence_lowercase", False)) is not bool:
        raise TokenizerError(f"'{os.path.join(directory, RECORD)}': 'sentence_lowercase' must be true or false, "
                             f"got {rec['sentence_lowercase']!r:.40}")
    try:
        tokenizer = TOKENIZERS[rec["kind"]].from_files(files, options)
    except KeyError as e:
        raise TokenizerError(f"'{os.path.join(directory, RECORD)}' names no {e} file for kind '{rec['kind']}'") from None
    tokenizer.sentence_lowercase = bool(rec.get("sentence_lowercase", False))
    return tokenizer


def _optional(path: str) -> Optional[str]:
    return path if os.path.isfile(path) else None


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
    for cls in TOKENIZERS.values():  # in the order the classes were defined
        tokenizer = cls.find_in(directory)
        if tokenizer is not None:
            return tokenizer
    return None


def looked_for() -> str:
    """What :func:`detect` looks for, in words."""
    names = [RECORD] + [cls.looks_for for cls in TOKENIZERS.values() if cls.looks_for]
    return ", ".join(names[:-1]) + " or " + names[-1]


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
        raise TokenizerError(f"{option}: '{directory}' holds no tokenizer: looked for {looked_for()}")
    return tokenizer


def from_bpe_options(bpe: str, directory: str, **files) -> Tokenizer:
    """The tokenizer of fairseq-style options (bpe='gpt2' with gpt2_encoder_json=..., ...)."""
    if bpe in TOKENIZERS:
        return TOKENIZERS[bpe].from_bpe_options(directory, **files)
    raise TokenizerError(f"bpe='{bpe}': choose one of {', '.join(kinds())}")


def first_shard(data: str) -> str:
    """The first of fairseq's ':'-separated data shards (an existing directory with ':' in its name is one)."""
    return data if os.path.isdir(data) else data.split(":")[0]


def check_same(data_dir: str, model_dir: str) -> None:
    """Refuse a data directory and a model directory whose records name different tokenizers."""
    a, b = read_record(data_dir), read_record(model_dir)
    if a is None or b is None or os.path.abspath(data_dir) == os.path.abspath(model_dir):
        return
    same = a["kind"] == b["kind"] and a.get("sha256") == b.get("sha256") and \
        a.get("sentence_lowercase", False) == b.get("sentence_lowercase", False) and (
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
