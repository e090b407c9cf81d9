"""Sentencepiece: train on a sample, encode in parallel (streaming), write dict.txt.

The dictionary contract (docs/design.md): ``dict.txt`` lists the sentencepiece
pieces in sentencepiece id order, leaving out control and unknown pieces, then
``<mask>`` and ``[DEL]``. fairseq prepends its four specials (``<s> <pad> </s>
<unk>``), so fairseq id = sentencepiece id + 1 for every ordinary piece (the
XLM-R convention), and sentencepiece's ``<unk>`` maps to fairseq's ``<unk>``.
The counts in ``dict.txt`` are the pieces' frequencies in the training split
(used by ``--freq-weighted-replacement``).
"""

import bisect
import io
import itertools
import logging
import os
import random
import time
from typing import Dict, List, NamedTuple, Optional

import numpy as np

from ..vocabulary import APPENDED_SYMBOLS, FAIRSEQ_SPECIALS
from ..atomic_files import atomic_write
from .common import LoggedProgress, PrepareError, ordered_parallel_map
from .documents import BREAK, DocumentMerger, render
from .text import block_spans, read_blocks, split_block_lines

logger = logging.getLogger(__name__)

MODEL_TYPES = ("unigram", "bpe")
LONG_SENTENCE_MODES = ("split", "truncate")
EXTRA_SYMBOLS = APPENDED_SYMBOLS
FAIRSEQ_SPECIALS = FAIRSEQ_SPECIALS[:4]
WORD_START = "\u2581"
#: Lines longer than this are encoded in pieces cut at spaces. sentencepiece never
#: joins pieces across a space, so the result is the same, without building a lattice
#: over megabytes of text.
ENCODE_SEGMENT_CHARS = 20_000
#: The encoder's unit of work (a worker's task): large enough that passing it and its result between
#: processes costs little against encoding it (BENCHMARKS §5 times the encode step at 1 and 2 workers).
ENCODE_BLOCK_BYTES = 1 << 20
#: Sampled training sentences are cut to this length (at a space): a few huge lines
#: would otherwise dominate the sample and sentencepiece's training time.
SAMPLE_MAX_CHARS = 2000


# ---- training --------------------------------------------------------------------------

def _sample_text(line: str, unk_token: str) -> str:
    """A line of the sentence file as the sample takes it ('': not a candidate): WikiText's
    ``unk_token`` (not text: kept out of the vocabulary) removed, cut to :data:`SAMPLE_MAX_CHARS`."""
    if unk_token and unk_token in line:
        line = " ".join(line.replace(unk_token, " ").split())
    if len(line) > SAMPLE_MAX_CHARS:
        cut = line.rfind(" ", 0, SAMPLE_MAX_CHARS)
        line = line[:cut if cut > 0 else SAMPLE_MAX_CHARS]
    return line


_SAMPLE: Dict = {}
#: the sampler's blocks, which its workers read themselves (no block goes through a pipe)
SAMPLE_BLOCK_BYTES = 4 << 20


def _init_sample(path: str, unk_token: str):
    _SAMPLE.update(path=path, unk=unk_token, unk_bytes=unk_token.encode("utf-8"))


#: the ASCII characters that ``str.split()`` splits at; the bytes 128-255 (UTF-8 beyond ASCII)
_ASCII_SPACE, _NOT_ASCII = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f", bytes(range(128, 256))


def _more_than_unk(raw: bytes) -> bool:
    """Whether a line holding ``unk_token`` keeps text without it (:func:`_sample_text` non-empty):
    an ASCII character that is not a space settles it without decoding the line."""
    rest = raw.replace(_SAMPLE["unk_bytes"], b"").translate(None, _ASCII_SPACE)
    if rest.translate(None, _NOT_ASCII):
        return True
    return bool(rest) and bool(_sample_text(raw.decode("utf-8"), _SAMPLE["unk"]))


def _candidate_lines(span) -> List[bytes]:
    """Worker: the candidate lines of a block of the file (non-empty, not only ``unk_token``)."""
    with open(_SAMPLE["path"], "rb") as f:
        f.seek(span[0])
        block = f.read(span[1] - span[0])
    lines, unk_bytes = split_block_lines(block), _SAMPLE["unk_bytes"]
    if unk_bytes and unk_bytes in block:  # (UTF-8: a substring of the bytes iff of the text)
        return [raw for raw in lines if raw and (unk_bytes not in raw or _more_than_unk(raw))]
    return [raw for raw in lines if raw]


def _count_candidates(span) -> int:
    """Worker: pass 1 of :func:`sample_lines`."""
    return len(_candidate_lines(span))


def _take_candidates(item) -> List[str]:
    """Worker: pass 2, the texts of a block's candidate lines at the given local indices."""
    span, wanted = item
    lines = _candidate_lines(span)
    return [_sample_text(lines[i].decode("utf-8"), _SAMPLE["unk"]) for i in wanted]


def sample_lines(path: str, size: int, seed: int, unk_token: str = "", workers: int = 1) -> List[str]:
    """A uniform sample of ``size`` candidate lines of ``path`` (the non-empty ones, each as
    :func:`_sample_text` takes it), in file order: every line when there are no more than ``size``.

    Two passes over the file in ``workers`` processes, in blocks: the candidates of each block are
    counted, then ``random.Random(seed).sample`` picks ``size`` of all of them by their place in the
    file, and each block gives back the lines picked in it. The sample depends on the file, ``size``
    and ``seed`` only, not on the workers or the blocks; memory is that of the sample."""
    spans = list(block_spans(path, SAMPLE_BLOCK_BYTES))
    counts = list(ordered_parallel_map(_count_candidates, spans, workers, _init_sample, (path, unk_token)))
    total = sum(counts)
    chosen = range(total) if total <= size else sorted(random.Random(seed).sample(range(total), size))
    items, pos, first = [], 0, 0  # index into chosen; the block's first candidate
    for span, n in zip(spans, counts):
        end = bisect.bisect_left(chosen, first + n, pos)  # the picks in this block: chosen[pos:end]
        if end > pos:
            items.append((span, [i - first for i in chosen[pos:end]]))
        pos, first = end, first + n
    sample: List[str] = []
    for lines in ordered_parallel_map(_take_candidates, items, workers, _init_sample, (path, unk_token)):
        sample.extend(lines)
    return sample


def train_sentencepiece(sent_path: str, model_path: str, vocab_size: int, model_type: str,
                        sample_size: int, seed: int, character_coverage: float,
                        unk_token: str, workers: int, work_dir: str, threads: int = 16) -> Dict:
    """Train a sentencepiece model on a sample of ``sent_path`` (drawn in ``workers`` processes), in
    ``threads`` of its trainer; writes ``model_path`` atomically. The model depends on ``threads``
    (the trainer's work is split by it), not on ``workers``, the machine or the folder."""
    import sentencepiece as spm

    sample = sample_lines(sent_path, sample_size, seed, unk_token, workers)
    if not sample:
        raise PrepareError(f"no training sentences in '{sent_path}' to train sentencepiece on")
    sample_path = os.path.join(work_dir, "spm_sample.txt")
    with atomic_write(sample_path) as f:
        for line in sample:
            f.write(line + "\n")
    model = io.BytesIO()
    # the sample from memory and the model through a writer: the model records no path (a trainer given
    # files records their names), so the same sample and options give the same bytes in any folder
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sample),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        # ids fixed as fairseq/XLM-R expect: fairseq id = spm id + 1
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        hard_vocab_limit=False,  # small corpora: a smaller vocabulary instead of an error
        num_threads=threads,
        input_sentence_size=0,  # the sample above is the whole input
        max_sentence_length=4 * SAMPLE_MAX_CHARS + 16,  # bytes
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    with atomic_write(os.path.splitext(model_path)[0] + ".vocab") as f:  # what spm_train writes beside it
        for i in range(sp.get_piece_size()):
            f.write(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n")
    with atomic_write(model_path, "wb") as f:
        f.write(model.getvalue())
    return {
        "model_type": model_type,
        "vocab_size_requested": vocab_size,
        "vocab_size": sp.get_piece_size(),
        "sample_sentences": len(sample),
        "character_coverage": character_coverage,
        "threads": threads,
    }


# ---- encoding (workers) --------------------------------------------------------------

_WORKER: Dict = {}


def tokenizer_vocabulary(source: str, dict_path: Optional[str] = None):
    """(encode text -> ids, symbol written for each id, word-start mask, ids written as <unk>,
    encode a list of texts -> their ids in one call, the tokenizer's own loop).

    ``source``: a sentencepiece model (clear-prepare's own), or a directory with a
    model's tokenizer and dict.txt (``--tokenizer-from``); there, ids whose symbol
    dict.txt lacks are written as ``<unk>`` and counted, and one extra id stands for
    ``--unk-token`` markers (a byte-level BPE has no unknown token of its own).
    """
    if not os.path.isdir(source):
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=source)
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        # written as fairseq's "<unk>", which fairseq-preprocess maps to its unk index
        pieces[sp.unk_id()] = "<unk>"
        is_start = np.array([p.startswith(WORD_START) for p in pieces], dtype=bool)
        is_start[sp.unk_id()] = True
        # one thread: the workers are the parallelism (and their rate, the rate per worker)
        return sp.encode, pieces, is_start, [sp.unk_id()], lambda texts: sp.encode(texts, num_threads=1)
    from .. import vocabulary
    from ..data.binarized_checks import load_dictionary

    tok = vocabulary.detect(source)
    dictionary = load_dictionary(dict_path or os.path.join(source, "dict.txt"))
    specials = tok.special_symbols()
    unknown = set(tok.unknown_ids())
    pieces = []
    for i, symbol in enumerate(tok.symbols()):
        symbol = specials.get(i, symbol)
        known = i not in unknown and dictionary.index(symbol) != dictionary.unk()
        pieces.append(symbol if known else "<unk>")
    is_start = np.array([tok.is_word_start(s) for s in tok.symbols()] + [True], dtype=bool)
    pieces.append("<unk>")
    return (lambda text: tok.encode_ids([text])[0]), pieces, is_start, \
        [i for i, p in enumerate(pieces) if p == "<unk>"], tok.encode_ids


def _init_worker(source: str, max_body: int, long_mode: str, unk_token: str):
    encode, pieces, is_start, unk_ids, encode_batch = tokenizer_vocabulary(source)
    _WORKER.clear()
    _WORKER.update(encode=encode, encode_batch=encode_batch, pieces=pieces, is_start=is_start, unk=unk_ids[-1],
                   unk_ids=np.asarray(unk_ids, dtype=np.int64), n=len(pieces),
                   max_body=max_body, long_mode=long_mode, unk_token=unk_token)


def _segments(text: str):
    """``text`` in pieces of at most :data:`ENCODE_SEGMENT_CHARS`, cut at spaces when possible.

    Yields (segment, cut_inside_word)."""
    pos, n = 0, len(text)
    while n - pos > ENCODE_SEGMENT_CHARS:
        cut = text.rfind(" ", pos + 1, pos + ENCODE_SEGMENT_CHARS)
        inside = cut <= pos
        if inside:
            cut = pos + ENCODE_SEGMENT_CHARS
        yield text[pos:cut], inside
        pos = cut
    yield text[pos:], False


def encode_text(text: str, stats: Dict, limit: Optional[int] = None, encode=None) -> List[int]:
    """sentencepiece ids of ``text``; ``unk_token`` occurrences become the unknown id.

    With ``limit``, encoding stops once ``limit`` ids are known (truncation). ``encode``: the ids of
    each part in turn, where they are known already (the tokenizer's, else)."""
    w = _WORKER
    encode, unk_token = encode or w["encode"], w["unk_token"]
    parts = text.split(unk_token) if unk_token and unk_token in text else [text]
    ids: List[int] = []
    for k, part in enumerate(parts):
        if k:
            ids.append(w["unk"])
            stats["unk_markers"] += 1
        if len(part) <= ENCODE_SEGMENT_CHARS:
            if part.strip():
                ids.extend(encode(part))
        else:
            for seg, inside in _segments(part):
                if inside:
                    stats["very_long_words_cut"] += 1
                if seg.strip():
                    ids.extend(encode(seg))
                if limit is not None and len(ids) > limit:
                    break
        if limit is not None and len(ids) > limit:
            break
    return ids


def split_ids(ids: np.ndarray, max_body: int, is_start: np.ndarray) -> List[np.ndarray]:
    """Cut ``ids`` into pieces of at most ``max_body``, at word starts where possible."""
    out, pos, n = [], 0, len(ids)
    while n - pos > max_body:
        end = pos + max_body
        starts = np.flatnonzero(is_start[ids[pos + max_body // 2 + 1:end + 1]])
        cut = pos + max_body // 2 + 1 + int(starts[-1]) if len(starts) else end
        out.append(ids[pos:cut])
        pos = cut
    out.append(ids[pos:])
    return out


def _line_ids(texts: List[str], stats: Dict, truncate: bool):
    """(the ids of ``texts``' lines end to end, each line's number of ids): what :func:`encode_text`
    gives each line, from one batch of the tokenizer per block (its loop, not Python's). A line without
    ``unk_token`` markers is a part of that batch; the parts around the markers are in it too and go
    back to encode_text in turn; lines longer than a segment are encode_text's."""
    w = _WORKER
    unk_token = w["unk_token"]
    whole, marked = [], []  # lines that are one part of the batch as they are; the others but empty ones
    for k, text in enumerate(texts):
        if len(text) > ENCODE_SEGMENT_CHARS or (unk_token and unk_token in text):
            marked.append(k)
        elif text.strip():
            whole.append(k)
    parts, in_parts = [texts[k] for k in whole], {}
    for k in marked:
        pieces = texts[k].split(unk_token) if unk_token else [texts[k]]
        if all(len(p) <= ENCODE_SEGMENT_CHARS for p in pieces):
            pieces = [p for p in pieces if p.strip()]
            in_parts[k] = (len(parts), len(parts) + len(pieces))
            parts.extend(pieces)
    batch = w["encode_batch"](parts) if parts else []
    line_ids: List = [()] * len(texts)
    for k, ids in zip(whole, batch):
        line_ids[k] = ids
    for k in marked:
        known = iter(batch[slice(*in_parts[k])]) if k in in_parts else None
        line_ids[k] = encode_text(texts[k], stats, limit=w["max_body"] if truncate else None,
                                  encode=None if known is None else lambda part: next(known))
    lengths = np.fromiter(map(len, line_ids), dtype=np.int64, count=len(line_ids))
    return np.fromiter(itertools.chain.from_iterable(line_ids), dtype=np.int64, count=int(lengths.sum())), lengths


class BlockIds(NamedTuple):
    """A block's ids end to end (``flat``) and where each of its output lines lies in them: line
    ``k`` is ``flat[starts[k]:ends[k]]``. Lines are referred to by their number, so a block of
    thousands of lines is not cut into thousands of arrays (the direct binarizer maps and packs the
    lines of a rendered part of the block in one indexing)."""
    flat: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def line(self, k: int) -> np.ndarray:
        return self.flat[self.starts[k]:self.ends[k]]


def encode_lines(block: bytes):
    """Worker: a block of sentence lines ('' = document break) → (events: BREAK, or the numbers in
    :class:`BlockIds` of the lines one sentence becomes; the block's :class:`BlockIds`, whose last
    line is an empty one, for the blank line between documents; piece counts; stats)."""
    w = _WORKER
    stats = dict(sentences_in=0, sentences=0, tokens=0, unk=0, unk_markers=0,
                 long_sentences_split=0, extra_lines_from_splitting=0,
                 long_sentences_truncated=0, tokens_truncated=0,
                 empty_after_encoding=0, very_long_words_cut=0)
    max_body = w["max_body"]
    truncate = w["long_mode"] == "truncate"
    text = block.decode("utf-8")
    texts = text.split("\n")  # split_block_lines, on the decoded block ("\n" is one byte in UTF-8)
    if text.endswith("\n"):
        texts.pop()
    flat, lengths = _line_ids(texts, stats, truncate)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # a line of ids is one sentence: [its number], or [] when it has none
    events = [BREAK if not t else [k] if h else [] for k, t, h in zip(itertools.count(), texts, (lengths > 0).tolist())]
    cut_lines = []  # (start, end) of the lines cut from long ones after their first: numbers len(texts)...
    kept = np.ones(len(flat), dtype=bool)  # the ids truncation leaves
    for k in np.flatnonzero(lengths > max_body).tolist():  # the long sentences
        start, end = int(starts[k]), int(ends[k])
        if truncate:
            stats["long_sentences_truncated"] += 1
            # exact when encoding stopped early: count what was encoded beyond the limit
            stats["tokens_truncated"] += end - start - max_body
            ends[k] = start + max_body
            kept[start + max_body:end] = False
        else:
            cuts = start + np.cumsum([len(part) for part in split_ids(flat[start:end], max_body, w["is_start"])])
            ends[k] = cuts[0]
            first = len(texts) + len(cut_lines)
            events[k] = [k, *range(first, first + len(cuts) - 1)]
            cut_lines.extend(zip(cuts[:-1].tolist(), cuts[1:].tolist()))
            stats["long_sentences_split"] += 1
            stats["extra_lines_from_splitting"] += len(cuts) - 1
    more = np.array(cut_lines + [(0, 0)], dtype=np.int64).reshape(-1, 2)  # the last: the blank line
    lines = BlockIds(flat, np.concatenate([starts, more[:, 0]]), np.concatenate([ends, more[:, 1]]))
    with_ids = int(np.count_nonzero(lengths))
    stats["sentences_in"] = sum(1 for t in texts if t)
    stats["empty_after_encoding"] = stats["sentences_in"] - with_ids
    stats["sentences"] = with_ids + stats["extra_lines_from_splitting"]
    stats["tokens"] = len(flat) - stats["tokens_truncated"]
    counts = np.bincount(flat[kept], minlength=w["n"])
    stats["unk"] = int(counts[w["unk_ids"]].sum())
    return events, lines, counts, stats


def encode_block(block: bytes):
    """Worker: a block of sentence lines → (rendered pieces, piece counts, stats)."""
    events, lines, counts, stats = encode_lines(block)
    pieces = _WORKER["pieces"]
    text = [ev if ev is BREAK else [" ".join([pieces[i] for i in lines.line(k).tolist()]) for k in ev]
            for ev in events]
    return render(text), counts, stats


#: the stats of :func:`encode_file`
STAT_KEYS = ("sentences_in", "sentences", "tokens", "unk", "unk_markers", "long_sentences_split",
             "extra_lines_from_splitting", "long_sentences_truncated", "tokens_truncated",
             "empty_after_encoding", "very_long_words_cut")


def encode_file(sent_path: str, out_path: str, model_path: str, max_body: int, long_mode: str,
                unk_token: str, workers: int, enabled_progress: bool = True,
                desc: str = "encode"):
    """Encode a sentence file into space-separated pieces (one line per sentence, blank lines
    between documents). Returns (stats, piece counts array)."""
    return encode_into(atomic_write(out_path), encode_block, _init_worker, sent_path, model_path, max_body,
                       long_mode, unk_token, workers, enabled_progress, desc)


def encode_into(sink, worker, init, sent_path: str, model_path: str, max_body: int, long_mode: str,
                unk_token: str, workers: int, enabled_progress: bool = True, desc: str = "encode"):
    """The encoding loop: blocks of ``sent_path`` through ``worker`` (set up by ``init``) in
    ``workers`` processes, their rendered lines joined into ``sink`` (a context manager giving what
    :class:`DocumentMerger` writes to: the text of pieces, or the direct binarizer's dataset).
    Returns (stats, piece counts array); the stats give MB/s, in all and per worker."""
    totals: Dict[str, int] = {k: 0 for k in STAT_KEYS}
    counts = None
    size = os.path.getsize(sent_path)
    # no more processes than blocks: a file of one block (a small valid split) is encoded in this
    # process, without starting a pool that would have nothing to share
    workers = max(1, min(workers, -(-size // ENCODE_BLOCK_BYTES)))
    started = time.time()
    with LoggedProgress(size, desc, unit="B", log=logger, enabled=enabled_progress) as bar, sink as out:

        def blocks():
            for block in read_blocks(sent_path, ENCODE_BLOCK_BYTES):
                yield block
                bar.update(len(block))

        merger = DocumentMerger(out, blank=getattr(out, "blank", "\n"))
        for rendered, c, stats in ordered_parallel_map(
            worker, blocks(), workers, init,
            (model_path, max_body, long_mode, unk_token),
        ):
            counts = c if counts is None else counts + c
            for k, v in stats.items():
                totals[k] = totals.get(k, 0) + v
            merger.add(rendered)
        merger.finish()
    if counts is None:
        counts = np.zeros(len(tokenizer_vocabulary(model_path)[1]), dtype=np.int64)
    assert merger.sentences == totals["sentences"]
    totals["documents"] = merger.documents
    totals["lines"] = merger.sentences + max(merger.documents - 1, 0)
    seconds = max(time.time() - started, 1e-9)
    # the rate per worker: what a machine with more cores multiplies
    totals["mb_per_s"] = round(size / 1e6 / seconds, 3)
    totals["mb_per_s_per_worker"] = round(size / 1e6 / seconds / max(1, workers), 3)
    return totals, counts


# ---- rows of text (labelled pairs, multitask rows) -------------------------------------

_TEXTS: Dict = {}


def _init_texts(source: str, dict_path: Optional[str]):
    _TEXTS["encode"] = tokenizer_vocabulary(source, dict_path)[4]


def _encode_texts(texts: List[str]) -> List[List[int]]:
    return [list(ids) for ids in _TEXTS["encode"](texts)]


def encode_texts(source: str, dict_path: Optional[str], texts: List[str], workers: int,
                 chunk: int = 2000) -> List[List[int]]:
    """The tokenizer ids of each of ``texts`` (:func:`tokenizer_vocabulary`'s encoder), in
    ``workers`` processes, in order: the columns of clear-prepare-pairs and clear-prepare-multitask."""
    out: List[List[int]] = []
    chunks = (texts[i:i + chunk] for i in range(0, len(texts), chunk))
    for ids in ordered_parallel_map(_encode_texts, chunks, workers, _init_texts, (source, dict_path)):
        out.extend(ids)
    return out


# ---- dictionary ----------------------------------------------------------------------

def dict_lines(model_path: str, counts: Optional[np.ndarray]):
    """The lines of dict.txt: pieces in sentencepiece id order (control/unknown left out), then
    <mask>, [DEL]; each with its count (0 without ``counts``)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=model_path)
    if (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) != (0, 1, 2, -1):
        raise PrepareError(
            f"sentencepiece model '{model_path}' must have unk=0, bos=1, eos=2 and no pad "
            f"(fairseq id = sentencepiece id + 1); it has unk={sp.unk_id()}, bos={sp.bos_id()}, "
            f"eos={sp.eos_id()}, pad={sp.pad_id()}"
        )
    reserved = set(FAIRSEQ_SPECIALS) | set(EXTRA_SYMBOLS)
    n = 0
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):
            continue
        piece = sp.id_to_piece(i)
        if piece in reserved or not piece or any(ch.isspace() for ch in piece):
            raise PrepareError(
                f"sentencepiece model '{model_path}': piece {i} {piece!r} clashes with a "
                "fairseq symbol or holds whitespace; it cannot go into dict.txt"
            )
        if i != n + 3:
            raise PrepareError(
                f"sentencepiece model '{model_path}': piece {i} would get fairseq id "
                f"{n + 4}, breaking fairseq id = sentencepiece id + 1 (control pieces "
                "beyond <s>, </s> are not supported)"
            )
        count = int(counts[i]) if counts is not None else 0
        yield f"{piece} {count}\n"
        n += 1
    for sym in EXTRA_SYMBOLS:
        yield f"{sym} 0\n"


def write_dict(model_path: str, counts: Optional[np.ndarray], dict_path: str) -> Dict:
    """dict.txt: pieces in sentencepiece id order (control/unknown left out), then <mask>, [DEL]."""
    n = 0
    with atomic_write(dict_path) as f:
        for line in dict_lines(model_path, counts):
            f.write(line)
            n += 1
    return {"dict_entries": n, "fairseq_dictionary_size": n + 4}
