"""The direct binarizer: the encoder's ids go straight into fairseq's indexed dataset.

``fairseq-preprocess --only-source --srcdict dict.txt`` reads the encoder's pieces back as text,
splits each line at whitespace and looks every piece up in the dictionary (``Dictionary.encode_line``
with ``append_eos``, no new symbols). Here the encoder's workers map their ids to the dictionary's
with a table made by that same lookup of each piece's text, and hand the ids of a block of lines,
packed in fairseq's dtype for the dictionary size, to fairseq's ``MMapIndexedDatasetBuilder`` in this
process; the blocks are byte ranges of the sentence file, merged in order (document breaks cross
them, see :mod:`.documents`). The ``.bin``/``.idx`` are byte-identical to fairseq-preprocess's for the
same text (tests/reliability/test_direct_binarize.py), without the text of pieces, its re-reading
and its per-word lookups; the lines' sizes wait in a file until the index is written, so memory
does not grow with the corpus.
"""

import collections
import hashlib
import io
import os
import struct
from contextlib import contextmanager
from typing import Dict, List, Sequence

import numpy as np

from ..atomic_files import atomic_path, tmp_name
from .documents import render

_WORKER: Dict = {}


def load_dictionary(model_path: str):
    """fairseq's Dictionary of the tokenizer ``model_path``: a model directory's dict.txt or, for
    clear-prepare's own sentencepiece model, the dict.txt the dict step will write from it (the
    ids depend on the order only, not on the counts)."""
    from fairseq.data import Dictionary

    if os.path.isdir(model_path):
        return Dictionary.load(os.path.join(model_path, "dict.txt"))
    from .encode import dict_lines

    return Dictionary.load(io.StringIO("".join(dict_lines(model_path, None))))


def symbols_digest(dictionary) -> str:
    """What the ids depend on: the dictionary's symbols in order (not their counts)."""
    return hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()


def id_table(pieces: List[str], dictionary):
    """(tokenizer id → dictionary id, or -1 where the piece's text is not one word; those ids' words;
    how many of each id's words fairseq counts as replaced by <unk>): ``Dictionary.encode_line`` of
    the text the text path writes (pieces the dictionary lacks are written as ``<unk>`` there)."""
    from fairseq.tokenizer import tokenize_line

    table = np.empty(len(pieces), dtype=np.int64)
    several: Dict[int, np.ndarray] = {}
    replaced = np.zeros(len(pieces), dtype=np.int64)
    for i, piece in enumerate(pieces):
        words = tokenize_line(piece)
        ids = [dictionary.index(w) for w in words]
        replaced[i] = sum(1 for w, k in zip(words, ids) if k == dictionary.unk_index and w != dictionary.unk_word)
        if len(ids) == 1:
            table[i] = ids[0]
        else:  # whitespace inside a piece: fairseq reads it as several words (or none)
            table[i] = -1
            several[i] = np.asarray(ids, dtype=np.int64)
    return table, several, replaced


class IdMap:
    """The tokenizer's ids → fairseq's bytes of a line: :func:`id_table` of the dictionary, its
    ``</s>`` and the dtype fairseq picks for its size (``best_fitting_int_dtype``)."""

    def __init__(self, pieces: List[str], dictionary):
        from fairseq.data.indexed_dataset import best_fitting_int_dtype

        self.table, self.several, self.replaced = id_table(pieces, dictionary)
        self.eos = dictionary.eos()
        self.dtype = best_fitting_int_dtype(len(dictionary))

    def ids(self, ids: np.ndarray) -> np.ndarray:
        """Dictionary ids of one line of tokenizer ids."""
        mapped = self.table[ids]
        if self.several and (mapped < 0).any():
            mapped = np.concatenate([self.several[i] if m < 0 else [m] for i, m in
                                     zip(ids.tolist(), mapped.tolist())]).astype(np.int64)
        return mapped

    def pack(self, lines: List[np.ndarray]):
        """Lines of the tokenizer's ids → (their dictionary ids' bytes with ``</s>`` after each, in
        fairseq's dtype; the lines' sizes), mapped in one indexing of the block."""
        if not lines:
            return b"", []
        if self.several:
            lines = [self.ids(line) for line in lines]
            flat = np.concatenate(lines)
        else:
            flat = self.table[np.concatenate(lines)]
        return self._with_eos(flat, np.fromiter(map(len, lines), dtype=np.int64, count=len(lines)))

    def pack_lines(self, block, numbers: List[int]):
        """:meth:`pack` of the lines ``numbers`` of ``block`` (an :class:`encode.BlockIds`): their
        ids taken in one slice where they lie end to end in the block (a block's lines as it
        renders them, but for truncated ones), else in one gather."""
        if not numbers:
            return b"", []
        if self.several:
            return self.pack([block.line(k) for k in numbers])
        idx = np.fromiter(numbers, dtype=np.int64, count=len(numbers))
        starts, ends = block.starts[idx], block.ends[idx]
        lengths = ends - starts
        some = lengths > 0
        first, last = starts[some], ends[some]
        if not len(first):
            ids = block.flat[:0]
        elif (first[1:] == last[:-1]).all():
            ids = block.flat[first[0]:last[-1]]
        else:
            offsets = np.cumsum(lengths) - lengths
            ids = block.flat[np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))]
        return self._with_eos(self.table[ids], lengths)

    def _with_eos(self, flat: np.ndarray, lengths: np.ndarray):
        sizes = lengths + 1
        out = np.empty(int(sizes.sum()), dtype=self.dtype)
        eos = np.cumsum(sizes) - 1
        body = np.ones(len(out), dtype=bool)
        body[eos] = False
        out[body], out[eos] = flat, self.eos
        return out.tobytes(), sizes.tolist()


def init_worker(model_path: str, max_body: int, long_mode: str, unk_token: str):
    from .encode import _WORKER as ENCODER, _init_worker

    _init_worker(model_path, max_body, long_mode, unk_token)
    _WORKER["map"] = IdMap(ENCODER["pieces"], load_dictionary(model_path))


def encode_block_ids(block: bytes):
    """Worker: a block of sentence lines → (its lines as packed dictionary ids, rendered as
    :func:`encode.encode_block` renders text; piece counts; stats)."""
    from .encode import encode_lines

    events, lines, counts, stats = encode_lines(block)
    pack = _WORKER["map"].pack_lines
    return render(events, join=lambda numbers: pack(lines, numbers), blank=len(lines.starts) - 1), counts, stats


class _Sink:
    """Where :class:`documents.DocumentMerger` writes packed lines: fairseq's builder."""

    def __init__(self, builder, eos: int):
        self.builder = builder
        self.blank = (np.array([eos], dtype=builder._dtype).tobytes(), [1])  # an empty line: a lone </s>

    def write(self, packed):
        data, sizes = packed
        # what MMapIndexedDatasetBuilder.add_item does per line, once per block
        self.builder._data_file.write(data)
        self.builder._sizes.extend(sizes)


class _SizesFile:
    """The builder's line sizes in a file of int32 (fairseq's builder keeps a Python int per line
    and its index writer a list of pointers: gigabytes for a corpus of a billion lines)."""

    def __init__(self, path: str):
        self.path, self.count = path, 0
        self.file = open(path, "wb")

    def extend(self, sizes):
        self.file.write(np.asarray(sizes, dtype=np.int32).tobytes())
        self.count += len(sizes)

    def chunks(self, lines: int = 1 << 22):
        self.file.close()
        with open(self.path, "rb") as f:
            while True:
                block = np.frombuffer(f.read(4 * lines), dtype=np.int32)
                if not len(block):
                    return
                yield block


def _finalize(builder, index_file: str) -> None:
    """``MMapIndexedDatasetBuilder.finalize`` in constant memory: fairseq's index writer writes the
    header, then the line count, the sizes (int32) and the byte offsets (int64) as its ``write``
    does, a block at a time."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    builder._data_file.close()
    sizes = builder._sizes
    itemsize = np.dtype(builder._dtype).itemsize
    with MMapIndexedDataset.Index.writer(index_file, builder._dtype) as index:
        index._file.write(struct.pack("<Q", sizes.count))
        for block in sizes.chunks():
            index._file.write(block.tobytes())
        address = 0
        for block in sizes.chunks():
            ends = address + np.cumsum(block, dtype=np.int64) * itemsize
            index._file.write(np.concatenate([[address], ends[:-1]]).astype(np.int64).tobytes())
            address = int(ends[-1])


@contextmanager
def dataset_writer(prefix: str, model_path: str):
    """fairseq's builder for ``prefix``.bin/.idx (``make_builder(..., "mmap", len(dictionary))``, as
    fairseq-preprocess makes it; its sizes kept in a file, :class:`_SizesFile`), written under
    temporary names and renamed when complete."""
    from fairseq.data import indexed_dataset

    dictionary = load_dictionary(model_path)
    sizes_tmp = tmp_name(prefix + ".sizes")
    with atomic_path(prefix + ".bin") as bin_tmp, atomic_path(prefix + ".idx") as idx_tmp:
        builder = indexed_dataset.make_builder(bin_tmp, "mmap", vocab_size=len(dictionary))
        builder._sizes = _SizesFile(sizes_tmp)
        try:
            yield _Sink(builder, dictionary.eos())
            _finalize(builder, idx_tmp)
        finally:
            builder._data_file.close()
            builder._sizes.file.close()
            if os.path.exists(sizes_tmp):
                os.unlink(sizes_tmp)


def encode_file(sent_path: str, prefix: str, model_path: str, max_body: int, long_mode: str, unk_token: str,
                workers: int, enabled_progress: bool = True, desc: str = "encode"):
    """:func:`encode.encode_file` with the ids written directly: ``prefix``.bin/.idx hold the
    dictionary ids that fairseq-preprocess writes for the text of pieces that function writes (with
    the tokenizer's dict.txt), and no text is written. Returns (stats, piece counts array); the
    stats add the words fairseq would count as replaced by <unk> and the dictionary's digest."""
    from . import encode

    stats, counts = encode.encode_into(dataset_writer(prefix, model_path), encode_block_ids, init_worker,
                                       sent_path, model_path, max_body, long_mode, unk_token, workers,
                                       enabled_progress, desc)
    stats["replaced"] = replaced_count(model_path, counts)
    stats["dictionary_sha256"] = symbols_digest(load_dictionary(model_path))
    return stats, counts


def replaced_count(model_path: str, counts: np.ndarray) -> int:
    """The words fairseq-preprocess would count as replaced by <unk> in the text of these pieces."""
    from .encode import tokenizer_vocabulary

    _, _, replaced = id_table(tokenizer_vocabulary(model_path)[1], load_dictionary(model_path))
    return int((replaced * counts[:len(replaced)]).sum())


def write_rows(dict_path: str, pieces: List[str], rows: Dict[str, List[Sequence[int]]], destdir: str) -> None:
    """``fairseq-preprocess --only-source --srcdict dict_path --destdir destdir`` of rows given as
    the tokenizer's ids (``pieces``: the text the text path writes for each id), one line a row:
    the labelled pairs' and the multitask rows' columns. ``rows``: split → its rows."""
    from fairseq.data import Dictionary, indexed_dataset

    vocab = Dictionary.load(dict_path)
    os.makedirs(destdir, exist_ok=True)
    vocab.save(os.path.join(destdir, "dict.txt"))
    m = IdMap(pieces, vocab)
    for split, lines in rows.items():
        prefix = os.path.join(destdir, split)
        builder = indexed_dataset.make_builder(prefix + ".bin", "mmap", vocab_size=len(vocab))
        _Sink(builder, m.eos).write(m.pack([np.asarray(line, dtype=np.int64) for line in lines]))
        builder.finalize(prefix + ".idx")


def publish(dict_path: str, prefixes: Dict[str, str], destdir: str, stats: Dict[str, Dict],
            log_path: str = "") -> str:
    """Put the direct binarizer's splits (``prefixes``: split → the prefix its encode step wrote)
    into ``destdir`` as fairseq-preprocess would leave them there (dict.txt saved by fairseq's
    Dictionary, ``SPLIT.bin``/``.idx``), checking that ``dict_path`` has the symbols they were
    written with; returns the lines fairseq-preprocess would log (also written to ``log_path``)."""
    from fairseq.binarizer import BinarizeSummary
    from fairseq.data import Dictionary

    from .common import PrepareError

    vocab = Dictionary.load(dict_path)
    vocab.save(os.path.join(destdir, "dict.txt"))
    lines = [f"[None] Dictionary: {len(vocab)} types"]
    for split, prefix in prefixes.items():
        st = stats[split]
        if st["dictionary_sha256"] != symbols_digest(vocab):
            raise PrepareError(f"'{dict_path}' is not the dictionary '{prefix}.bin' was written with; "
                               "run again with --force")
        for ext in (".bin", ".idx"):
            target = os.path.join(destdir, split + ext)
            try:  # the encode step's file, under a second name: no copy of gigabytes
                os.link(prefix + ext, target)
            except OSError:
                import shutil

                shutil.copyfile(prefix + ext, target)
        summary = BinarizeSummary(num_seq=st["lines"], num_tok=st["tokens"] + st["lines"])
        summary.replaced = collections.Counter({"<unknown pieces>": st["replaced"]})
        lines.append(f"[None] {prefix}: {summary} (by {vocab.unk_word})")
    lines.append(f"Wrote preprocessed data to {destdir}")
    output = "\n".join(lines) + "\n"
    if log_path:
        with open(log_path, "w", encoding="utf-8") as f:
            f.write(f"the direct binarizer (as fairseq-preprocess --only-source --srcdict {dict_path} "
                    f"--destdir {destdir})\n" + output)
    return output
