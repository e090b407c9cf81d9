"""The recipes' training budget from the corpus: ``--max-update``, the schedule's total and
warm-up, and the log interval, from the number of examples actually binarized and a number of
epochs (EPOCHS; the papers': SimCSE 1 unsupervised, 3 supervised; DeCLUTR 1), not from the
papers' corpus sizes. Used by fairseq_clear/continued.py, which the recipes call.

Examples per epoch, as the tasks sample them:
  clear, simcse-unsup  non-empty lines of DATA/train.idx (sentences; the blank lines clear-prepare
                       writes between documents are not samples)
  declutr              documents of DATA/train.idx (runs of lines between blank lines) of at least
                       2·A·ℓmax tokens (--min-document-tokens), the ones DeCLUTR can sample
  simcse-sup, clsr     the rows clear-prepare-pairs wrote (DATA/pairs.json splits.train.pairs_written)
"""

import json
import os
from typing import Dict, List, Optional, Tuple

#: each mode's epochs (the paper's number of passes over its corpus)
EPOCHS = {"simcse-unsup": ("1", "SimCSE: 1 epoch unsupervised"), "simcse-sup": ("3", "SimCSE: 3 epochs supervised"),
          "declutr": ("1", "DeCLUTR: 1 epoch"), "clear": ("1", "1 epoch, as SimCSE-unsup continues an encoder"),
          "clsr": ("2000", "CLSR: 2,000 epochs of its heads")}


def given(words: List[str], option: str) -> str:
    """The value of ``--option`` in ``words`` (the last one, as argparse takes it), else ''."""
    value = ""
    for i, word in enumerate(words):
        if word == "--" + option and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--" + option + "="):
            value = word.split("=", 1)[1]
    return value


def _sizes(data: str):
    import numpy as np

    from fairseq.data.indexed_dataset import MMapIndexedDataset

    path = os.path.join(data, "train")
    if not os.path.exists(path + ".idx"):
        raise FileNotFoundError(f"{path}.idx does not exist (binarize the corpus with clear-prepare)")
    dataset = MMapIndexedDataset(path)
    body = np.array(dataset.sizes, dtype=np.int64) - 1  # a copy (the sizes are a view of the mmap), without </s>
    del dataset
    return body


def count_examples(mode: str, data: str, words: List[str]) -> Tuple[int, str]:
    """(examples in one epoch of ``data``'s train split, what they are and where they were counted)."""
    if mode in ("simcse-sup", "clsr"):
        path = os.path.join(data, "pairs.json")
        with open(path, encoding="utf-8") as f:
            n = json.load(f)["splits"]["train"]["pairs_written"]
        if type(n) is not int or n < 1:
            raise ValueError(f"{path}: splits.train.pairs_written is {n!r}, not a positive integer")
        return n, f"{n:,} pairs ({path})"
    body = _sizes(data)
    if mode != "declutr":
        n = int((body > 0).sum())
        return n, f"{n:,} sentences ({os.path.join(data, 'train')}.idx)"
    import numpy as np

    anchors = int(given(words, "num-anchors") or 2)
    longest = int(given(words, "max-span-length") or 512)
    required = int(given(words, "min-document-tokens") or 0) or 2 * anchors * longest
    is_text = body > 0
    starts = np.flatnonzero(is_text & ~np.concatenate([[False], is_text[:-1]]))
    ends = np.flatnonzero(is_text & ~np.concatenate([is_text[1:], [False]])) + 1
    cumsum = np.concatenate([[0], np.cumsum(body)])
    n = int(((cumsum[ends] - cumsum[starts]) >= required).sum())
    return n, (f"{n:,} documents of at least {required} tokens, of {len(starts):,} "
               f"({os.path.join(data, 'train')}.idx)")


def updates_per_epoch(examples: int, batch: int, multiple: int = 8) -> int:
    """The batches fairseq makes of ``examples`` at ``batch`` each: full batches, then the rest cut
    to a multiple of --required-batch-size-multiple and what is left over (20 at 64 and 8: 16 + 4;
    the plugin keeps that last batch, which fairseq would drop)."""
    full, rest = divmod(examples, batch)
    if batch % multiple:
        return full + (rest > 0)
    return full + (rest // multiple > 0) + (rest % multiple > 0)


def log_interval(max_update: int, cpu: bool) -> int:
    """About 50 log lines a run, and early: on a CPU every 3 updates at most (MiniLM, batch 64, took
    8 s an update on a loaded 2-core machine: a line within about 25 s of the first update)."""
    return max(1, min(3 if cpu else 100, max_update // 50))


def plan(mode: str, data: str, epochs: str, batch: int, cpu: bool, words: List[str], env: Dict[str, str],
         warmup_ratio: float = 0.0, warmup: Optional[str] = None) -> Tuple[List[str], List[str], int]:
    """(fairseq-train options, log lines, max_update): ``words`` are every option the run gets
    (the recipe's, then the continued-training values, then the user's); the user's win."""
    out, log = [], []
    epochs_source = "yours: EPOCHS" if env.get("EPOCHS") else EPOCHS[mode][1]
    epochs = env.get("EPOCHS") or epochs or EPOCHS[mode][0]
    try:
        n_epochs = float(epochs)
        assert n_epochs > 0
    except (ValueError, AssertionError):
        raise ValueError(f"EPOCHS must be a positive number, got '{epochs}'")
    mine = given(words, "max-update") or env.get("MAX_UPDATE", "")
    if mine:
        max_update = int(mine)
        if not given(words, "max-update"):
            out += ["--max-update", mine]
        log.append(f"max-update {max_update} (yours: {'--max-update' if given(words, 'max-update') else 'MAX_UPDATE'})")
    else:
        n, what = count_examples(mode, data, words)
        per_epoch = updates_per_epoch(n, batch, int(given(words, "required-batch-size-multiple") or 8))
        max_update = max(1, int(round(n_epochs * per_epoch)))
        out += ["--max-update", str(max_update)]
        log.append(f"max-update {max_update} = {epochs} epoch(s) ({epochs_source}) x {per_epoch} updates of "
                   f"{batch} over {what}; EPOCHS= or MAX_UPDATE= to change")
    if not given(words, "total-num-update"):
        out += ["--total-num-update", str(max_update)]
    if warmup is None and not given(words, "warmup-updates") and warmup_ratio:
        out += ["--warmup-updates", str(int(max_update * warmup_ratio))]
    if not given(words, "log-interval"):
        interval = log_interval(max_update, cpu)
        out += ["--log-interval", str(interval)]
    return out, log, max_update
