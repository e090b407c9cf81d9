"""The recipes' training budget from the corpus: ``--max-update``, the schedule's total and
warm-up, and the log interval, from the number of examples actually binarized and a number of
epochs (EPOCHS; the papers': SimCSE 1 unsupervised, 3 supervised; DeCLUTR 1), not from the
papers' corpus sizes. Used by fairseq_clear/continued.py, which the recipes call.

Examples per epoch, as the tasks sample them, by the mode's data (paper_defaults.CONTINUED):
  text, lines  non-empty lines of DATA/train.idx (sentences; the blank lines clear-prepare
               writes between documents are not samples)
  documents    documents of DATA/train.idx (runs of lines between blank lines) of at least
               2·A·ℓmax tokens (--min-document-tokens), the ones DeCLUTR can sample
  pairs        the rows clear-prepare-pairs wrote (DATA/pairs.json splits.train.pairs_written)

And the disk the run's checkpoints take (``checkpoint_plan``): checkpoint_best.pt, checkpoint_last.pt
and KEEP interval checkpoints, each about 3 x the starting model's weights (Adam's two moments beside
them), checked against the free space of the save directory before training.
"""

import json
import os
import re
import shutil
from typing import Dict, List, Optional, Tuple

from .paper_defaults import CONTINUED  # each mode's epochs, data and frozen encoder


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
    data_kind = CONTINUED[mode].data
    if data_kind == "pairs":
        path = os.path.join(data, "pairs.json")
        with open(path, encoding="utf-8") as f:
            n = json.load(f)["splits"]["train"]["pairs_written"]
        if type(n) is not int or n < 1:
            raise ValueError(f"{path}: splits.train.pairs_written is {n!r}, not a positive integer")
        return n, f"{n:,} pairs ({path})"
    body = _sizes(data)
    if data_kind != "documents":
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
    epochs_source = "yours: EPOCHS" if env.get("EPOCHS") else CONTINUED[mode].epochs[1]
    epochs = env.get("EPOCHS") or epochs or CONTINUED[mode].epochs[0]
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


# ---- the checkpoints a recipe keeps and the disk they take ---------------------------------------
#: a checkpoint holds the weights and, for each trained weight, Adam's two moments (fp32): 3 x the
#: weights. Measured: all-MiniLM-L6-v2 (22.7 M weights, 91 MB) wrote checkpoints of 273 MB; the tests'
#: 2-layer stand-in 13 % more than the rule (its config and options weigh beside 143 kB of weights).
#: CLSR trains its heads only (its encoder is frozen): 1 x.
ADAM_COPIES = 3


def weight_bytes(state: dict) -> int:
    """The bytes of a checkpoint's model weights in fp32, each tensor's storage once (a tied
    embedding and LM head share one)."""
    import torch

    seen, total = set(), 0
    for value in (state.get("model") or {}).values():
        if torch.is_tensor(value) and value.is_floating_point():
            storage = value.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes() // value.element_size() * 4
    return total


def size_text(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def keep_from(env: Dict[str, str]) -> int:
    """KEEP: the interval checkpoints to keep beside checkpoint_best.pt and checkpoint_last.pt."""
    keep = env.get("KEEP", "") or "0"
    if not re.fullmatch(r"[0-9]+", keep):
        raise ValueError(f"KEEP must be a number of interval checkpoints to keep (0 or more), got '{keep}'")
    return int(keep)


def checkpoint_plan(mode: str, weights: Optional[int], save_dir: str, words: List[str], user: List[str],
                    keep: int, max_update: int = 0) -> Tuple[List[str], str]:
    """(log lines, error: '' when the disk has room) for the checkpoints a run keeps in ``save_dir``.

    ``words``: every option of the run (the user's last), ``user``: the user's; ``weights``: the
    starting model's fp32 bytes (None: from scratch, size unknown). Kept: checkpoint_best.pt,
    checkpoint_last.pt and KEEP interval checkpoints (fairseq keeps at least its newest one while the
    run lasts: the recipe removes it at the end when KEEP is 0), or what your --keep-interval-updates
    says. Refused: less room than the two checkpoints (free space, plus the checkpoints there that
    the run replaces)."""
    def number(word):  # a value fairseq-train will refuse is not this plan's to report
        return int(word) if re.fullmatch(r"-?[0-9]+", word) else None

    interval = number(given(words, "save-interval-updates")) or 0
    theirs = number(given(user, "keep-interval-updates"))
    if not interval:
        extra, during, what = 0, 0, ""
    elif theirs is None:
        extra, during = keep, max(keep, 1)
        what = f" + the newest {keep} interval checkpoint(s) (KEEP)" if keep else " (KEEP=N keeps N interval checkpoints too)"
    else:
        extra = theirs if theirs > 0 else (max_update // interval if max_update else 0)
        during = extra
        what = f" + {'the newest ' + str(theirs) if theirs > 0 else 'every'} interval checkpoint (yours: --keep-interval-updates)"
    files = f"checkpoint_best.pt and checkpoint_last.pt{what}"
    if weights is None:
        return [f"checkpoints in {save_dir}: {files}"], ""
    copies = 1 if CONTINUED[mode].frozen_encoder else ADAM_COPIES
    momentum = (number(given(words, "queue-size")) or 0) > 0  # the criterion's state: an fp32 copy of the model
    each = (copies + momentum) * weights
    # at a save: the kept files, the new interval checkpoint and the temporary copy of best or last
    peak = 2 + during + (2 if interval else 1)
    path = os.path.abspath(save_dir)
    while not os.path.isdir(path):
        path = os.path.dirname(path)
    free = shutil.disk_usage(path).free
    replaced = sum(os.path.getsize(os.path.join(save_dir, f)) for f in ("checkpoint_best.pt", "checkpoint_last.pt")
                   if os.path.isfile(os.path.join(save_dir, f)))
    why = (f"the weights; {CONTINUED[mode].paper}'s frozen encoder has no Adam moments" if copies == 1
           else f"{copies} x the weights' {size_text(weights)}: the weights and Adam's two moments")
    if momentum:
        why += ", and --queue-size's momentum encoder, one more copy"
    log = [f"checkpoints in {save_dir}: {files}, about {size_text(each)} each ({why}): "
           f"{size_text((2 + extra) * each)}, up to {size_text(peak * each)} while one is written; "
           f"{size_text(free)} free there" + (f" (+ {size_text(replaced)} of checkpoints it replaces)" if replaced else "")]
    if free + replaced < 2 * each:
        return log, (f"{save_dir}: {size_text(free)} free, too little for checkpoint_best.pt and checkpoint_last.pt "
                     f"(about {size_text(2 * each)}: 2 x {size_text(each)}); free some space there or choose "
                     "another SAVE_DIR (run.sh: OUT)")
    if free + replaced < peak * each:
        log.append(f"warning: {size_text(free)} free in {save_dir}, less than the {size_text(peak * each)} a save "
                   "can take at once: the run may stop at a save (the checkpoints written before it stay whole)")
    return log, ""
