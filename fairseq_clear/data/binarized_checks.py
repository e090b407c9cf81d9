"""Start-up checks of a binarized split, so that damaged data fails naming its file.

fairseq reads ``SPLIT.idx``/``SPLIT.bin`` lazily: a truncated file, ids beyond the
dictionary (data binarized with another dict.txt) or an empty split otherwise fail
deep inside torch or fairseq, often only when the bad sentence is reached.
"""

import os

import numpy as np
from fairseq.data import data_utils
from ..errors import FairseqClearError


class BinarizedDataError(FairseqClearError, ValueError):
    """A binarized split is missing, damaged or does not fit the dictionary; the message names the file."""


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
        itemsize = np.dtype(index.dtype).itemsize
        end = int(index._pointers[-1]) + int(sizes[-1]) * itemsize
        if end > len(buffer):
            raise BinarizedDataError(
                f"'{bin_}' is truncated: its index needs {end} bytes, the file has {len(buffer)}; "
                "binarize the split again"
            )
        tokens = np.frombuffer(buffer, dtype=index.dtype, count=end // itemsize)
        top = int(tokens.max()) if len(tokens) else 0
        if top >= len(dictionary):
            raise BinarizedDataError(
                f"'{bin_}' holds token id {top} but the dictionary has {len(dictionary)} entries: the split "
                "was binarized with another dict.txt (binarize it with --srcdict DATA/dict.txt)"
            )
    return dataset
