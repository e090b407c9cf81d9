"""Start-up checks of a binarized split, so that damaged data fails naming its file.

fairseq reads ``SPLIT.idx``/``SPLIT.bin`` lazily: a truncated file, ids beyond the
dictionary (data binarized with another dict.txt) or an empty split otherwise fail
deep inside torch or fairseq, often only when the bad sentence is reached.
"""

import os

import numpy as np
from fairseq.data import Dictionary, data_utils

from ..errors import FairseqClearError
from ..export.output_dir import MANIFEST, interrupted, written_by


class BinarizedDataError(FairseqClearError, ValueError):
    """A binarized split is missing, damaged or does not fit the dictionary; the message names the file."""


class DictionaryFileError(FairseqClearError, ValueError):
    """A dict.txt that fairseq cannot read; the message names the file and the line."""


def _bad_dictionary_line(path: str, text: str):
    """(line number, reason) of the first line fairseq's ``Dictionary.add_from_file`` refuses."""
    seen = set(Dictionary().symbols)  # <s> <pad> </s> <unk> come first
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.rstrip().rsplit(" ", 1)
        if len(parts) == 2 and parts[1] == "#fairseq:overwrite":
            parts = parts[0].rsplit(" ", 1) + ["overwrite"]
        try:
            int(parts[1])
        except (IndexError, ValueError):
            return number, f"expected '<token> <count>', got {line[:80]!r}"
        if parts[0] in seen and parts[-1] != "overwrite":
            return number, f"{parts[0][:80]!r} is listed twice"
        seen.add(parts[0])
    return None


def load_dictionary(path: str) -> Dictionary:
    """fairseq's ``Dictionary.load(path)``; a damaged file fails naming it and the line.

    fairseq's own messages (a duplicate, a line without a count, bad UTF-8) do not say which file.
    A directory whose files a command was stopped while replacing (export/output_dir.py: some of
    them are still the previous run's) is refused.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if interrupted(directory):
        raise DictionaryFileError(f"{directory}: {written_by(directory)} was stopped while replacing its files (its "
                                  f"{MANIFEST} still lists them as pending); run it again")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DictionaryFileError(f"{path}:{line}: not UTF-8 ({e.reason}): build dict.txt again") from None
    try:
        return Dictionary.load(path)
    except (ValueError, RuntimeError) as e:  # fairseq's format and duplicate errors
        where = _bad_dictionary_line(path, text)
        place, reason = (f"{path}:{where[0]}", where[1]) if where else (path, str(e))
        raise DictionaryFileError(f"{place}: {reason}: not a fairseq dictionary (build dict.txt again)") from None


def load_checked(split_path: str, dictionary, combine: bool = False):
    """fairseq's ``load_indexed_dataset`` for ``split_path``, checked; None when the split is absent."""
    idx, bin_ = split_path + ".idx", split_path + ".bin"
    if not os.path.exists(idx) and not os.path.exists(bin_):
        return None
    for path in (idx, bin_):
        if not os.path.isfile(path):
            raise BinarizedDataError(f"'{path}' is missing (its pair exists): binarize the split again")
        if os.path.getsize(path) == 0:
            raise BinarizedDataError(
                f"'{path}' is empty: the split holds no sentences (check the text it was made from, "
                "or binarize it again)"
            )
    try:
        dataset = data_utils.load_indexed_dataset(split_path, dictionary, combine=combine)
    except Exception as e:  # a damaged index fails in numpy/struct with no file name
        raise BinarizedDataError(f"'{idx}' is damaged ({type(e).__name__}: {e}): binarize the split again") from None
    if dataset is None:
        return None
    if len(dataset) == 0:
        raise BinarizedDataError(f"'{split_path}.bin' holds no sentences: check the text the split was made from")
    index = getattr(dataset, "_index", None)
    buffer = getattr(dataset, "_bin_buffer", None)
    if index is not None and buffer is not None:  # fairseq's mmap format
        sizes = np.asarray(index.sizes, dtype=np.int64)
        pointers = np.asarray(index._pointers, dtype=np.int64)
        itemsize = np.dtype(index.dtype).itemsize
        # every sentence, not only the last: fairseq reads a negative size as "the rest of the file"
        bad = np.flatnonzero((sizes < 0) | (pointers < 0))
        if len(bad):
            i = int(bad[0])
            raise BinarizedDataError(
                f"'{idx}' is damaged: sentence {i} has size {int(sizes[i])} at byte offset {int(pointers[i])} "
                f"({len(bad)} such sentences); binarize the split again"
            )
        ends = pointers + sizes * itemsize
        over = np.flatnonzero(ends > len(buffer))
        if len(over):
            i = int(over[0])
            where = f"sentence {i} (size {int(sizes[i])} at byte offset {int(pointers[i])}) ends at byte {int(ends[i])}"
            if len(over) == len(sizes) - i and bool(np.all(np.diff(ends[i:]) >= 0)):  # every later one too
                raise BinarizedDataError(
                    f"'{bin_}' is truncated: {where}, the file has {len(buffer)} bytes; binarize the split again"
                )
            raise BinarizedDataError(
                f"'{idx}' is damaged: {where} of '{bin_}', which has {len(buffer)} bytes "
                f"({len(over)} such sentences); binarize the split again"
            )
        end = int(ends.max())
        tokens = np.frombuffer(buffer, dtype=index.dtype, count=end // itemsize)
        top = int(tokens.max()) if len(tokens) else 0
        if top >= len(dictionary):
            raise BinarizedDataError(
                f"'{bin_}' holds token id {top} but the dictionary has {len(dictionary)} entries: the split "
                "was binarized with another dict.txt (binarize it with --srcdict DATA/dict.txt)"
            )
    return dataset
