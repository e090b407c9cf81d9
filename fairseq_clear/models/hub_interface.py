"""Hub interface: load a trained checkpoint and embed sentences.

    >>> from fairseq_clear.models import ClearRobertaModel
    >>> clear = ClearRobertaModel.from_pretrained(
    ...     "checkpoints", "checkpoint_best.pt", "data-bin")  # DATA/sentencepiece.model by default
    >>> vectors = clear.embed(["A man plays a guitar.", "Someone plays music."])
    >>> clear.similarity("A man plays a guitar.", "Someone plays music.")

``ClearHubInterface`` is fairseq's ``RobertaHubInterface`` (``encode``,
``decode``, ``extract_features``, ``fill_mask``, ``predict``, ... all work) plus
``embed()`` and ``similarity()``, modelled on sentence-transformers' ``encode()``.
"""

import contextlib
import logging
import os
import threading
from types import SimpleNamespace
from typing import List, Optional, Union

import numpy as np
import torch
from fairseq.models.roberta.hub_interface import RobertaHubInterface

from .. import vocabulary
from ..vocabulary import DictionaryEncoder
from .inference import (
    PromptsError,
    SentencepieceDictionaryEncoder,
    check_pooling,
    check_sentences,
    embed_tokens,
    encode_sentences,
    output_dim,
    pooling_skip,
    read_prompts_word,
    sentence_input,
)
from ..errors import FairseqClearError

logger = logging.getLogger(__name__)

CONVERT_CHOICES = ("numpy", "torch")
PRECISION_CHOICES = ("fp32", "bf16", "fp16")
#: dict.txt and a tokenizer that made it share (almost) all of dict.txt's symbols: measured on
#: fairseq-preprocess dictionaries of 200 to 8,000 lines of Wikipedia, at most 1.8% of their
#: symbols were not pieces of the sentencepiece model (characters it cannot encode, written as
#: they are); with another sentencepiece model (other text, same size) 23-61%, with a GPT-2
#: dictionary 92%. Pieces of the tokenizer missing from dict.txt are normal (fairseq-preprocess
#: keeps only those the corpus used) and become <unk>, as in training.
MAX_FOREIGN_SYMBOLS = 0.10



class HubLoadError(FairseqClearError, ValueError):
    """A checkpoint cannot be loaded as asked; the message names the file or argument."""


class ClearHubInterface(RobertaHubInterface):
    """RoBERTa's hub interface plus sentence embeddings (``embed``, ``similarity``)."""

    def __init__(self, cfg, task, model, tokenizer=None):
        """``tokenizer``: a :class:`~fairseq_clear.vocabulary.Tokenizer`, or the path of a
        sentencepiece model (default: cfg.bpe.sentencepiece_model)."""
        super().__init__(cfg, task, model)
        if tokenizer is None or isinstance(tokenizer, str):
            spm_path = tokenizer or _cfg_get(cfg, "bpe", "sentencepiece_model")
            self.tokenizer = SentencepieceDictionaryEncoder(spm_path, task.source_dictionary)
        else:
            self.tokenizer = DictionaryEncoder(tokenizer, task.source_dictionary)
        dict_path = getattr(task.source_dictionary, "path", None) or "dict.txt"
        kind = self.tokenizer.tokenizer.kind
        foreign = self.tokenizer.foreign_share()
        if foreign > MAX_FOREIGN_SYMBOLS:
            raise HubLoadError(
                f"{kind} tokenizer '{self.tokenizer.path}' and dictionary '{dict_path}' do not belong together: "
                f"{100 * foreign:.1f}% of the dictionary's symbols are not in the tokenizer's vocabulary (a "
                "dictionary made from text that this tokenizer encoded has almost none); pass the tokenizer "
                "that produced the dictionary (clear-prepare and clear-import-hf write both into one directory)"
            )
        missing = self.tokenizer.missing_share()
        if missing > 0:
            logger.warning(
                "%.1f%% of the %s tokenizer's pieces are not in '%s' (fairseq-preprocess keeps the pieces its "
                "corpus used): they become <unk>, as in training", 100 * missing, kind, dict_path,
            )
        self._local = threading.local()

    @property
    def num_truncated(self) -> int:
        """Sentences truncated by this thread's last embed() call."""
        return getattr(self._local, "num_truncated", 0)

    @num_truncated.setter
    def num_truncated(self, value: int):
        self._local.num_truncated = value

    @property
    def dim(self) -> int:
        """Size of the default sentence vectors."""
        return output_dim(self.model, "representation")

    @property
    def default_pooling(self) -> str:
        return self.model.args.sentence_pooling

    @property
    def matryoshka_dims(self) -> List[int]:
        """The sizes this model's contrastive loss was trained at (``--matryoshka-dims``, largest
        first), [] when it was not (or for an imported model: clear-import-hf records none)."""
        return matryoshka_dims_of(self.cfg)

    @property
    def max_length(self) -> int:
        """Tokens a sentence is truncated to, <s> and </s> included: the model's positions, or fewer where the
        starting model's sentence-transformers max_seq_length says so (``--sentence-max-length``)."""
        return sentence_input(self.model).max_length

    @property
    def lowercase(self) -> bool:
        """Whether sentences are lower-cased first (sentence-transformers' do_lower_case, ``--sentence-lowercase``)."""
        return sentence_input(self.model).lowercase

    @property
    def prompt(self) -> str:
        """The default prompt put before every sentence (sentence-transformers' default_prompt_name, recorded
        by clear-import-hf in ``--sentence-prompts``); '' when none."""
        return sentence_input(self.model).prompt

    @property
    def prompts(self) -> dict:
        """``(prompts, default prompt name)`` of the starting model's config_sentence_transformers.json."""
        return read_prompts_word(getattr(self.model.args, "sentence_prompts", None))

    @property
    def similarity_fn_name(self) -> str:
        """sentence-transformers' similarity function of the model (``--sentence-similarity``; default cosine):
        what :meth:`similarity` and :meth:`search` score with."""
        return getattr(self.model.args, "sentence_similarity", None) or "cosine"

    @property
    def default_normalize(self) -> bool:
        """Whether the model's own vectors are unit length (``--sentence-normalize``)."""
        return bool(getattr(self.model.args, "sentence_normalize", False))

    def embed(
        self,
        sentences: Union[str, List[str]],
        pooling: Optional[str] = None,
        batch_size: int = 64,
        normalize: Optional[bool] = None,
        show_progress: Optional[bool] = None,
        convert_to: str = "numpy",
        head: str = "representation",
        device: Optional[str] = None,
        precision: str = "fp32",
        truncate_dim: Optional[int] = None,
        quantize: Optional[str] = None,
        quantize_ranges=None,
    ):
        """Sentence vectors, in the order given (sentence-transformers' ``encode()`` style).

        Args:
            sentences: a list of str (or one str, which gives one vector). ``''``
                is embedded as ``<s></s>``.
            pooling: ``cls`` (the ``<s>`` output, CLEAR), ``mean`` (over all
                tokens, ``<s>``/``</s>`` included) or another name of ``models.pooling.POOLINGS``
                (sentence-transformers' modes); default: the model's
                ``--sentence-pooling``.
            batch_size: sentences per forward pass (batches are made of sentences
                of similar length, then the input order is restored).
            normalize: scale every vector to unit length; default: the model's own
                (``--sentence-normalize``: a sentence-transformers model with a Normalize
                module, recorded by clear-import-hf, gives unit vectors; others do not).
            show_progress: a progress bar; ``None`` shows one when more than
                one batch is run and stderr is a terminal.
            convert_to: ``numpy`` (float32 array) or ``torch`` (float32 tensor on
                the model's device).
            head: ``representation`` (default: the pooled encoder output, through
                CLSR's sentence encoder e when the model has one), ``pooled``
                (the encoder output only) or ``projection`` (through the
                projection head g used by the contrastive loss; not what the
                paper evaluates).
            device: ``cpu``, ``cuda`` or ``cuda:N``; the model is moved there (as
                sentence-transformers does); default: where the model is. ``hub.to()``,
                ``hub.cuda()`` and ``hub.half()`` work as for any fairseq hub.
            precision: ``fp32`` (default), ``bf16`` (autocast; CPU or GPU) or ``fp16``
                (autocast; GPU only). Vectors are returned as float32 either way; bf16
                differs from fp32 by about 1e-2 at most (benchmarks/bench_embed.py, BENCHMARKS.md section 5b).
            truncate_dim: keep the first this many dimensions (sentence-transformers'
                ``truncate_dim``), before ``normalize``; meant for a model trained with
                ``--matryoshka-dims`` (``self.matryoshka_dims``); default: all.
            quantize: ``int8``, ``uint8``, ``binary`` or ``ubinary``: the vectors (after
                ``normalize``) as sentence-transformers' ``quantize_embeddings`` gives them
                (int8/uint8 arrays; binary: 8 dimensions a byte); default: float32.
            quantize_ranges: int8/uint8's per-dimension (2, dim) minima and maxima
                (``fairseq_clear.quantization.calibration_ranges`` of a corpus); default: those
                of the sentences given, as sentence-transformers' ``encode(precision=...)``.

        Sentences longer than ``self.max_length`` tokens are truncated; a warning gives the
        count, also kept in ``self.num_truncated``. A model with a default prompt (``self.prompt``) puts it
        before every sentence, and one that lower-cases its input (``self.lowercase``) then lower-cases
        both, as sentence-transformers' ``encode()`` does (``models.inference.encode_sentences``).
        """
        single = isinstance(sentences, str)
        sentences = check_sentences([sentences] if single else sentences)
        pooling = pooling or self.default_pooling
        if normalize is None:
            normalize = self.default_normalize
        check_pooling(pooling)
        full = self.model.representation_dim(head)  # raises for an unknown or missing head
        check_truncate_dim(truncate_dim, full)
        if quantize is not None:
            from ..quantization import QuantizationError, check_precision, check_ranges

            check_precision(quantize)
            if quantize_ranges is not None:  # before any work
                quantize_ranges = check_ranges(quantize_ranges, truncate_dim or full, "quantize_ranges")
            elif quantize in ("int8", "uint8") and len(sentences) < 2:
                raise QuantizationError(f"quantize={quantize!r} of {len(sentences)} sentence(s) needs "
                                        "quantize_ranges (calibrated on a corpus): one vector has no range")
        if convert_to not in CONVERT_CHOICES:
            raise ValueError(f"unknown convert_to '{convert_to}', choose from {CONVERT_CHOICES}")
        if precision not in PRECISION_CHOICES:
            raise ValueError(f"unknown precision '{precision}', choose from {PRECISION_CHOICES}")
        if device is not None:
            self.to(_check_device(device))
        model_device = next(self.model.parameters()).device
        if precision == "fp16" and model_device.type != "cuda":
            raise ValueError("precision='fp16' needs a CUDA device (pass device='cuda'); on CPU use 'bf16'")
        max_positions = self.max_length
        tokens, self.num_truncated = encode_sentences(self.tokenizer, self.model, sentences)
        if self.num_truncated:
            logger.warning(
                "embed: truncated %d of %d sentences longer than the model's %d tokens "
                "(%d pieces + <s> and </s>)",
                self.num_truncated, len(sentences), max_positions, max_positions - 2,
            )
        if show_progress is None:
            import sys

            show_progress = len(sentences) > batch_size and sys.stderr.isatty()
        autocast = (
            torch.autocast(model_device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
            if precision != "fp32" else contextlib.nullcontext()
        )
        with autocast:
            vectors = embed_tokens(
                self.model, tokens, (pooling,), head=head, batch_size=batch_size,
                show_progress=show_progress, skip=pooling_skip(self.tokenizer, self.model),
            )[pooling]
        if truncate_dim is not None:
            vectors = vectors[:, :truncate_dim]
        if normalize:
            from ..search import unit_rows

            vectors = unit_rows(vectors, "sentences")  # scale-safe, as search and similarity
        if quantize is not None:
            from ..quantization import quantize as quantized

            vectors = torch.from_numpy(quantized(vectors.numpy(), quantize, quantize_ranges))
        if single:
            vectors = vectors[0]
        if convert_to == "torch":
            return vectors.to(self.device)
        return vectors.numpy()

    def search(self, queries, corpus, top_k: int = 10, **embed_kwargs):
        """The ``top_k`` best matches in ``corpus`` (sentences or vectors) of each query, best first,
        as ``[{'corpus_id': i, 'score': s}, ...]`` per query (sentence-transformers' format), scored by
        the model's similarity function (:attr:`similarity_fn_name`: cosine unless the starting model
        had another). Vectors holding NaN or Inf (given, or embedded by a broken model) are refused naming
        ``queries`` or ``corpus`` and their rows, so every score is finite."""
        from ..search import check_count, semantic_search

        check_count("top_k", top_k)  # before embedding anything
        qv, _ = self._as_vectors(queries, "queries", embed_kwargs)
        cv, _ = self._as_vectors(corpus, "corpus", embed_kwargs)
        if self.similarity_fn_name == "cosine":
            return semantic_search(qv, cv, top_k=top_k)
        self._check_widths(qv, cv, "queries", "corpus")
        results = []
        for start in range(0, qv.size(0), 100):  # a block of queries against the corpus at a time
            scores, ids = self._similarities(qv[start:start + 100], cv).topk(min(top_k, cv.size(0)), dim=1)
            results += [[{"corpus_id": int(i), "score": float(v)} for v, i in zip(row_s, row_i)]
                        for row_s, row_i in zip(scores.tolist(), ids.tolist())]
        return results

    def similarity(self, a, b, pairwise: bool = False, **embed_kwargs):
        """The model's similarity of sentences or vectors: cosine, or the starting model's
        sentence-transformers similarity function (:attr:`similarity_fn_name`: ``dot``, ``euclidean`` and
        ``manhattan`` score as sentence-transformers' ``similarity()``, the distances negated).

        ``a`` and ``b`` are each a str, a list of str, or vectors (numpy or
        torch, 1-D or 2-D); strings are embedded with ``embed(**embed_kwargs)``.
        Two single items give a float; otherwise an (len(a), len(b)) numpy
        matrix, or with ``pairwise=True`` the (n,) similarities of a[i] and b[i].
        A zero vector has cosine similarity 0 with anything; a vector holding NaN or Inf
        is refused (an error naming ``a`` or ``b`` and its rows).
        """
        from ..search import SearchInputError

        va, single_a = self._as_vectors(a, "a", embed_kwargs)
        vb, single_b = self._as_vectors(b, "b", embed_kwargs)
        self._check_widths(va, vb, "a", "b")
        if pairwise:
            if va.size(0) != vb.size(0):
                raise SearchInputError(f"pairwise=True needs as many a as b, got {va.size(0)} and {vb.size(0)}")
            return self._similarities(va, vb, pairwise=True).numpy()
        sims = self._similarities(va, vb)
        if single_a and single_b:
            return float(sims[0, 0])
        return sims.numpy()

    @staticmethod
    def _check_widths(va, vb, a, b):
        from ..search import SearchInputError

        if va.size(1) != vb.size(1):
            raise SearchInputError(f"{a} has {va.size(1)}-dimensional vectors but {b} has {vb.size(1)}")

    def _similarities(self, va, vb, pairwise: bool = False) -> torch.Tensor:
        """sentence-transformers' SimilarityFunction of the model on rows from :meth:`_as_vectors`."""
        name = self.similarity_fn_name
        if name in ("cosine", "dot"):  # cosine: the rows are unit length already
            return (va * vb).sum(-1) if pairwise else va @ vb.T
        p = 2 if name == "euclidean" else 1
        return -torch.linalg.vector_norm(va - vb, ord=p, dim=-1) if pairwise else -torch.cdist(va, vb, p=p)

    def _as_vectors(self, x, name, embed_kwargs):
        """``(vectors, single)`` of ``x``: sentences are embedded, vectors taken as given; rows
        holding NaN or Inf are refused naming ``name`` (search.unit_rows). The rows are unit length for a
        cosine model (:attr:`similarity_fn_name`), as they are (float32) for the others."""
        from ..search import SearchTypeError, unit_rows

        if isinstance(x, (bytes, bytearray, dict)) or not hasattr(x, "__iter__"):
            # iterating bytes gives ints and a dict its keys: refuse the container itself
            raise SearchTypeError(f"{name} must be a str, a list of str or vectors, got {type(x).__name__}")
        if isinstance(x, str):
            x = [x]
            single = True
        elif isinstance(x, (np.ndarray, torch.Tensor)):
            single = x.ndim == 1
        else:
            x = list(x)
            single = False
            if x and not isinstance(x[0], str) and all(
                isinstance(v, (np.ndarray, torch.Tensor)) for v in x
            ):
                x = torch.stack([torch.as_tensor(v) for v in x])
        if isinstance(x, list):
            check_sentences(x, name)
            x = self.embed(x, **dict(embed_kwargs, convert_to="torch")).detach().cpu()
        elif isinstance(x, torch.Tensor):
            x = x.detach().cpu()
        unit = unit_rows(x, name)  # the check of every row, whatever the similarity
        if self.similarity_fn_name == "cosine":
            return unit, single
        raw = (x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))).float()
        return raw.reshape(-1, unit.size(1)), single


class TruncateDimError(FairseqClearError, ValueError):
    """``truncate_dim`` / ``--truncate-dim`` outside 1..the vectors' size."""


def check_truncate_dim(truncate_dim, full: int) -> None:
    if truncate_dim is None:
        return
    if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or not 1 <= truncate_dim <= full:
        raise TruncateDimError(f"truncate_dim must be an int in 1..{full} (the vectors' size), got {truncate_dim!r}")


def matryoshka_dims_of(cfg, full: Optional[int] = None) -> List[int]:
    """``--matryoshka-dims`` of a checkpoint's config (largest first; [] when none), read as training
    reads the option; with ``full``, each size must be at most that (the trained vectors' size)."""
    from ..losses import matryoshka

    criterion = cfg.get("criterion", None) if hasattr(cfg, "get") else getattr(cfg, "criterion", None)
    text = criterion.get("matryoshka_dims", "") if hasattr(criterion, "get") else getattr(criterion, "matryoshka_dims", "")
    dims, _ = matryoshka(SimpleNamespace(matryoshka_dims=text or "", matryoshka_weights=""))
    if dims and full is not None and dims[0] > full:
        raise HubLoadError(f"--matryoshka-dims {text}: the largest size is more than the {full} dimensions of the "
                           "vectors it was trained on")
    return dims or []


def _inference_overrides() -> dict:
    """Every registered task's training-only options with their inference values (each class's
    ``inference_overrides``, its bases' included); read from fairseq's registry, where importing
    the package put the tasks, so that the model layer never imports the tasks."""
    from fairseq.tasks import TASK_REGISTRY

    out = {}
    for task in TASK_REGISTRY.values():
        for cls in reversed(getattr(task, "__mro__", ())):
            out.update(vars(cls).get("inference_overrides") or {})
    return out


def _check_device(device) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device={device!r} is not a torch device ('cpu', 'cuda' or 'cuda:N'): {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r}: CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r}: there are only {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise ValueError(f"device={device!r}: choose 'cpu', 'cuda' or 'cuda:N'")
    return dev


def _cfg_get(cfg, group, key):
    section = cfg.get(group) if hasattr(cfg, "get") else getattr(cfg, group, None)
    if section is None:
        return None
    return section.get(key) if hasattr(section, "get") else getattr(section, key, None)


def as_clear_roberta(model_cfg):
    """Point a stock RoBERTa model config (``checkpoint_safety.stock_roberta_names``) at
    clear_roberta, whose encoder is the same module with the same parameter names; its sizes
    stay as saved."""
    from ..checkpoint_safety import stock_roberta_names

    stock = stock_roberta_names()
    name = getattr(model_cfg, "_name", None) if not hasattr(model_cfg, "get") else model_cfg.get("_name")
    arch = getattr(model_cfg, "arch", None) if not hasattr(model_cfg, "get") else model_cfg.get("arch")
    if name in stock or arch in stock:
        from omegaconf import OmegaConf, open_dict

        ctx = open_dict(model_cfg) if OmegaConf.is_config(model_cfg) else contextlib.nullcontext()
        with ctx:
            if name is not None:
                model_cfg._name = "clear_roberta"
            model_cfg.arch = "clear_roberta"


def _find_dictionary(data_dir):
    # --task clear layout: DATA/dict.txt; fairseq's sentence_prediction: DATA/input0/dict.txt
    for candidate in (os.path.join(data_dir, "dict.txt"), os.path.join(data_dir, "input0", "dict.txt")):
        if os.path.isfile(candidate):
            return candidate
    return None


def resolve_data_dir(model_dir: str, data_name_or_path) -> str:
    """The absolute data directory: ``"."`` (from_pretrained's default) is the model directory,
    anything else is a path as a shell reads it (``./x`` and ``../x`` from the current directory)."""
    data = str(data_name_or_path)
    if data in (".", ""):
        return model_dir
    return os.path.abspath(os.path.expanduser(data))


#: fairseq's options naming tokenizer files, taken by from_pretrained as keyword arguments
BPE_FILE_OPTIONS = ("sentencepiece_model", "gpt2_encoder_json", "gpt2_vocab_bpe", "bpe_vocab_file", "bpe_cased")


def find_tokenizer(bpe, data_dir, model_dir, files) -> "vocabulary.Tokenizer":
    """The tokenizer named by ``bpe`` and ``files``, else the one found in the data or model directory."""
    if bpe is not None and bpe not in vocabulary.TOKENIZERS:
        raise HubLoadError(f"bpe='{bpe}': choose one of {', '.join(vocabulary.kinds())} (or None: found in the directory)")
    for name, path in files.items():
        if name != "bpe_cased" and not os.path.isfile(path):
            raise HubLoadError(f"{name} '{path}' does not exist")
    try:
        if bpe is None and files.get("sentencepiece_model"):
            bpe = "sentencepiece"
        if bpe is None:
            for directory in dict.fromkeys((data_dir, model_dir)):
                tokenizer = vocabulary.detect(directory)
                if tokenizer is not None:
                    return tokenizer
            raise HubLoadError(
                f"no tokenizer in '{data_dir}' or '{model_dir}': looked for {vocabulary.RECORD}, "
                "sentencepiece.model (no sentencepiece model), encoder.json + vocab.bpe (GPT-2 BPE) and "
                "vocab.txt (WordPiece); pass bpe= and its files (sentencepiece_model=, "
                "gpt2_encoder_json= + gpt2_vocab_bpe=, bpe_vocab_file=)"
            )
        errors = []
        for directory in dict.fromkeys((data_dir, model_dir)):
            try:
                return vocabulary.from_bpe_options(bpe, directory, **files)
            except vocabulary.TokenizerError as e:
                errors.append(str(e))
        hint = " (no sentencepiece model)" if bpe == "sentencepiece" else ""
        raise HubLoadError(f"bpe='{bpe}'{hint}: " + "; ".join(dict.fromkeys(errors)))
    except vocabulary.TokenizerError as e:
        raise HubLoadError(str(e)) from None


def from_pretrained(
    model_name_or_path,
    checkpoint_file="model.pt",
    data_name_or_path=".",
    bpe=None,
    allow_nonfinite_weights: bool = False,
    data_option: str = "data_name_or_path=",
    **kwargs,
) -> ClearHubInterface:
    """Load ``model_name_or_path/checkpoint_file`` with the dictionary of ``data_name_or_path``.

    ``data_name_or_path`` is the binarized data directory the model was trained
    on (dict.txt). Exactly ``"."`` (the default) is the model directory itself; any other
    relative path (``./data``, ``../data``, ``data``) means what it means in a shell: relative
    to the current directory. ``bpe`` is ``sentencepiece`` (our own data, XLM-R),
    ``gpt2`` (fairseq's roberta.base, imported RoBERTa) or ``bert`` (WordPiece);
    by default it is found in the data directory, then the model directory
    (``clear_tokenizer.json``, ``sentencepiece.model``, ``encoder.json`` +
    ``vocab.bpe``, ``vocab.txt``). Its files may be given as fairseq names them:
    ``sentencepiece_model=``, ``gpt2_encoder_json=``/``gpt2_vocab_bpe=``,
    ``bpe_vocab_file=``/``bpe_cased=``. Training-only task options (augmentations,
    synonym table, STS validation file) are switched off, so loading needs none of
    the training machine's files. A checkpoint whose weights hold NaN or Inf is refused
    (``NonFiniteWeightsError`` naming the tensor) unless ``allow_nonfinite_weights=True``.
    ``data_option`` is how error messages name the data directory (a command line's ``--data``).
    Other keyword arguments override checkpoint options, as in fairseq.
    """
    from ..fairseq_fixes.checkpoint_loading import safe_load_checkpoint_to_cpu
    from .errors import DictionarySizeError

    model_dir = os.path.abspath(os.path.expanduser(str(model_name_or_path)))
    if not os.path.isdir(model_dir):
        raise HubLoadError(f"model directory '{model_name_or_path}' does not exist")
    # one file, even with ':' in its name (fairseq would split it into an ensemble)
    checkpoint_path = os.path.join(model_dir, checkpoint_file)
    if not os.path.isfile(checkpoint_path):
        raise HubLoadError(
            f"checkpoint '{checkpoint_path}' does not exist (checkpoint_file="
            f"'{checkpoint_file}'; fairseq-train writes checkpoint_best.pt and checkpoint_last.pt)"
        )
    data_dir = resolve_data_dir(model_dir, data_name_or_path)
    dict_path = _find_dictionary(data_dir)
    if dict_path is None:
        raise HubLoadError(
            f"{data_option}: no dict.txt in '{data_dir}': give the binarized data directory "
            "the model was trained on (it holds dict.txt and its tokenizer)"
        )
    files = {k: kwargs.pop(k) for k in BPE_FILE_OPTIONS if k in kwargs}
    files = {k: v for k, v in files.items() if v is not None}
    tokenizer = find_tokenizer(bpe, data_dir, model_dir, files)
    try:
        vocabulary.check_same(data_dir, model_dir)
    except vocabulary.TokenizerError as e:
        raise HubLoadError(str(e)) from None

    # training-only task options may name files of the training machine (tasks/contrastive.py)
    overrides = _inference_overrides()
    overrides.update(kwargs)
    overrides.update(data=data_dir, load_checkpoint_heads=True, **tokenizer.fairseq_bpe())
    from fairseq import tasks

    # what fairseq's load_model_ensemble_and_task does for one file (so a ':' in its path
    # is not an ensemble separator), building fairseq's stock RoBERTa as clear_roberta
    state = safe_load_checkpoint_to_cpu(checkpoint_path, overrides, allow_nonfinite=allow_nonfinite_weights)
    cfg = state["cfg"]
    as_clear_roberta(cfg.model)
    task = tasks.setup_task(cfg.task, from_checkpoint=True)  # drops options a task no longer has
    model = task.build_model(cfg.model, from_checkpoint=True)
    try:
        model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    except DictionarySizeError as e:
        raise HubLoadError(f"{dict_path}: {e}") from None
    except RuntimeError as e:
        raise HubLoadError(f"{checkpoint_path}: its weights do not fit the model its config describes: {e}") from None
    try:  # what embed() and the export read later: refused now, naming the file
        head = "projection" if getattr(model, "projection_head", None) is not None else "representation"
        matryoshka_dims_of(cfg, model.representation_dim(head))
    except FairseqClearError as e:
        raise HubLoadError(f"{checkpoint_path}: its config's criterion option {e}") from None
    try:
        sentence_input(model)  # --sentence-prompts, which every embed() reads
    except PromptsError as e:
        raise HubLoadError(f"{checkpoint_path}: its config's {e}") from None
    hub = ClearHubInterface(cfg, task, model, tokenizer)
    hub.checkpoint_path = checkpoint_path  # what the export's model card reads the training options from
    hub.eval()  # inference is what the hub is for; hub.train() turns dropout back on
    return hub
