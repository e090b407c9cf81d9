"""Batched sentence embedding for a ``ClearRobertaModel``: tokenisation and forward passes.

The representation itself is the model's (:meth:`ClearRobertaModel.represent`); this
module only batches, pads and restores the order.

Shared by the hub's ``embed()``, ``clear-eval-sts``, ``clear-embed`` and the
in-training STS validation, so that all of them produce the same vectors.

Tokenisation calls sentencepiece once for a whole list of sentences and maps
sentencepiece ids to dictionary ids through a lookup table built from the
pieces themselves. That gives exactly the ids of fairseq's
``--bpe sentencepiece`` + ``Dictionary.encode_line`` path (the hub's
``encode()``) without building and re-splitting a string per sentence.
"""

import contextlib
import json
import logging
import os
import re
from typing import Dict, List, NamedTuple, Sequence

import numpy as np
import torch

from .. import vocabulary
from ..errors import FairseqClearError
from ..vocabulary import DictionaryEncoder
from .pooling import HEAD_CHOICES, POOLING_CHOICES, check_pooling  # noqa: F401  (re-exported)

logger = logging.getLogger(__name__)


class SentencepieceDictionaryEncoder(DictionaryEncoder):
    """:class:`~fairseq_clear.vocabulary.DictionaryEncoder` over a sentencepiece ``.model`` file."""

    def __init__(self, sentencepiece_model: str, dictionary):
        if not os.path.isfile(sentencepiece_model):
            raise FileNotFoundError(f"sentencepiece model '{sentencepiece_model}' does not exist")
        super().__init__(vocabulary.SentencepieceTokenizer(sentencepiece_model), dictionary)
        self.sp = self.tokenizer.sp


class PromptsError(FairseqClearError, ValueError):
    """A ``--sentence-prompts`` value that is not the word :func:`prompts_word` writes."""


def prompts_word(prompts: Dict[str, str], default_name=None) -> str:
    """sentence-transformers' prompts and default prompt name as one command-line word
    (``--sentence-prompts``): JSON, every byte but ASCII letters and digits as %XX. fairseq_args.txt and
    the recipes join options with spaces, and a prompt ("query: ") has spaces; this word has none, and
    no '-' to pass for an option."""
    text = json.dumps({"prompts": dict(prompts), "default_prompt_name": default_name}, sort_keys=True,
                      separators=(",", ":"))
    return "".join(chr(b) if chr(b).isascii() and chr(b).isalnum() else f"%{b:02X}" for b in text.encode("utf-8"))


def read_prompts_word(word: str):
    """``(prompts, default prompt name)`` of a :func:`prompts_word`; ``({}, None)`` for none."""
    from urllib.parse import unquote

    if not word:
        return {}, None
    try:
        if re.fullmatch(r"([A-Za-z0-9]|%[0-9A-F]{2})*", word) is None:
            raise ValueError("not a %XX-encoded word")
        value = json.loads(unquote(word, errors="strict"))
        prompts, name = value["prompts"], value["default_prompt_name"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()) or \
                (name is not None and name not in prompts):
            raise ValueError("not a str -> str dict with its default's name")
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise PromptsError(f"--sentence-prompts {word[:60]!r} is not a word written by clear-import-hf: {e}") from None
    return prompts, name


class SentenceInput(NamedTuple):
    """What a model does to a sentence before its tokens (sentence-transformers' Transformer module, as
    clear-import-hf recorded it): the default prompt put in front, lower-casing, the length it is cut to."""

    prompt: str
    lowercase: bool
    max_length: int

    def texts(self, sentences: Sequence[str]) -> List[str]:
        # as encode(): the prompt first, then the Transformer module lower-cases prompt and sentence alike
        sentences = [self.prompt + s for s in sentences] if self.prompt else list(sentences)
        return [s.lower() for s in sentences] if self.lowercase else sentences


def sentence_input(model) -> SentenceInput:
    """The model's :class:`SentenceInput`: its options ``--sentence-prompts`` (the default prompt),
    ``--sentence-lowercase`` and ``--sentence-max-length`` (at most its positions)."""
    args = model.args
    prompts, name = read_prompts_word(getattr(args, "sentence_prompts", None))
    own = getattr(args, "sentence_max_length", None)
    positions = model.max_positions()
    return SentenceInput(prompts.get(name, "") if name else "", bool(getattr(args, "sentence_lowercase", False)),
                         min(positions, own) if own else positions)


def encode_sentences(encoder: DictionaryEncoder, model, sentences: Sequence[str], prompt: bool = True):
    """``(tokens, how many were truncated)`` of ``sentences`` as ``model`` reads them (:func:`sentence_input`):
    the one tokenisation of embed(), clear-embed, clear-eval-sts and the STS validation. ``prompt=False``:
    without the default prompt (the export compares its tokenizer's ids, which never hold one)."""
    settings = sentence_input(model)
    if not prompt:
        settings = settings._replace(prompt="")
    return encoder.encode_counted(settings.texts(sentences), max_positions=settings.max_length)


def pooling_skip(encoder: DictionaryEncoder, model) -> int:
    """How many leading positions of every sentence the pooling leaves out: the default prompt's tokens when
    the model pools without them (``--sentence-exclude-prompt``: sentence-transformers' ``include_prompt``
    false), counted as ``encode()`` counts them: the prompt tokenised alone (lower-cased, cut to the
    length as a sentence), less a trailing special token (</s>, [SEP]); <s> is among them. 0 otherwise."""
    settings = sentence_input(model)
    if not settings.prompt or not getattr(model.args, "sentence_exclude_prompt", False):
        return 0
    tokens = encoder.encode_counted(settings.texts([""]), max_positions=settings.max_length)[0][0]
    return len(tokens) - int(len(tokens) > 0 and int(tokens[-1]) == encoder.eos)


def vector_settings(encoder: DictionaryEncoder, model) -> dict:
    """What changes the model's vectors besides its weights and tokenizer files, as plain data (a cache of
    vectors keys on it): how a sentence is read (:func:`sentence_input`: the default prompt, lower-casing,
    length), the positions the pooling leaves out (:func:`pooling_skip`) and the Dense layers."""
    return {**sentence_input(model)._asdict(), "pooling_skip": pooling_skip(encoder, model),
            "sentence_dense": getattr(model.args, "sentence_dense", None)}


def check_sentences(sentences, what: str = "sentences") -> List[str]:
    """A list of str, or a TypeError naming the first offending index (None included)."""
    if isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__iter__"):
        raise TypeError(f"{what} must be a list of str, got {type(sentences).__name__}")
    sentences = list(sentences)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise TypeError(
                f"{what}[{i}] is {type(s).__name__} ({s!r:.40}), not str: every item must be "
                "a sentence (use '' for an empty one)"
            )
    return sentences


@contextlib.contextmanager
def eval_mode(model):
    """``model.eval()`` for the block, restoring the previous mode even on error."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def output_dim(model, head: str = "representation") -> int:
    """Size of the vectors that :func:`embed_tokens` returns for ``head``."""
    return model.representation_dim(head)


def length_batches(lengths: Sequence[int], batch_size: int) -> List[np.ndarray]:
    """Indices grouped into batches of similar length (longest first: memory peaks early)."""
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def padded_batches(tokens: List[torch.Tensor], pad: int, batch_size: int):
    """``(rows, src)`` per batch of :func:`length_batches`: the rows' indices (LongTensor) and their
    tokens right-padded with ``pad``. A generator: a caller that embeds the same sentences again
    (the STS validation) keeps the list; others build one batch at a time."""
    for index in length_batches([len(t) for t in tokens], batch_size):
        rows = [tokens[i] for i in index]
        src = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
        for j, r in enumerate(rows):
            src[j, : len(r)] = r
        yield torch.from_numpy(index), src


def embed_tokens(
    model,
    tokens: List[torch.Tensor],
    poolings: Sequence[str] = ("cls",),
    head: str = "representation",
    batch_size: int = 64,
    show_progress: bool = False,
    skip: int = 0,
) -> Dict[str, torch.Tensor]:
    """Sentence vectors for token sequences, one float32 (N, dim) CPU tensor per pooling.

    Sorts by length, right-pads each batch, runs the encoder once per batch
    (several poolings share the forward pass), and restores the input order.
    Dropout is off and no gradient is kept. A vector that is not finite (a model loaded with
    ``allow_nonfinite_weights``, an fp16 overflow) raises :class:`NonFiniteVectorsError`: no
    NaN is ever handed on as an embedding. ``skip``: leading positions left out of the pooling
    (:func:`pooling_skip`).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batches = padded_batches(tokens, model.encoder.dictionary.pad(), batch_size)
    if show_progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="embedding", unit="batch", total=-(-len(tokens) // batch_size))
    return embed_batches(model, batches, len(tokens), poolings, head, skip)


def embed_batches(model, batches, n: int, poolings: Sequence[str] = ("cls",),
                  head: str = "representation", skip: int = 0) -> Dict[str, torch.Tensor]:
    """:func:`embed_tokens` over the ``(rows, src)`` batches of :func:`padded_batches` of ``n`` sentences."""
    dim = output_dim(model, head)  # raises for an unknown or missing head
    for p in poolings:
        check_pooling(p)
    cls_only = set(poolings) == {"cls"} and not skip  # without the prompt, [CLS] pooling takes the first other token
    out = {p: torch.empty(n, dim, dtype=torch.float32) for p in poolings}
    if not n:
        return out
    pad = model.encoder.dictionary.pad()
    device = next(model.parameters()).device
    with eval_mode(model), torch.inference_mode():
        for where, src in batches:
            src = src.to(device)
            features = model.sentence_features(src, cls_only=cls_only)
            padding_mask = src.eq(pad)[:, : features.size(1)]
            if skip:  # the prompt's positions, as sentence-transformers' Pooling masks them
                padding_mask = padding_mask | (torch.arange(padding_mask.size(1), device=device) < skip)
            for p in poolings:
                out[p][where] = model.represent(features, padding_mask, p, head).float().cpu()
    for p, vectors in out.items():
        bad = (~torch.isfinite(vectors).all(dim=1)).nonzero().flatten().tolist()
        if bad:
            raise NonFiniteVectorsError(
                f"{len(bad)} of {n} sentence vectors ({p} pooling) are not finite (NaN/Inf), "
                f"e.g. of sentences {', '.join(map(str, bad[:5]))}: the model's weights or its precision "
                "give no usable embedding for them"
            )
    return out


class NonFiniteVectorsError(FairseqClearError, ValueError):
    """The model produced NaN/Inf sentence vectors; they are never returned."""


def cosine_rows(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """Row-wise cosine similarity of two (N, dim) tensors, as float64 numpy."""
    a, b = a.double(), b.double()
    return torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-12).numpy()
