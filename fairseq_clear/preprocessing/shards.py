"""A corpus too large for one machine: one vocabulary, then shards prepared anywhere.

1. ``clear-prepare RAW... VOCAB --only-vocab [--sample-mb M]``: the sentencepiece model and dict.txt
   from a sample of the corpus (evenly spaced pieces of every input file, M MB in all), published as
   VOCAB/data-bin with no .bin: the ``--tokenizer-from`` of step 2.
2. ``clear-prepare RAW... DATA --tokenizer-from VOCAB/data-bin --shards N [--shard-ids 0,3]``: the
   training inputs are dealt into N shards of whole files (each file to the shard with the fewest
   bytes so far, in the sorted order: every machine that sees the same corpus deals the same
   shards), and the shards named are prepared, each by the ordinary pipeline, into
   DATA/data-bin/shardK (fairseq's layout: ``fairseq-train DATA/data-bin/shard0:DATA/data-bin/shard1``
   reads shard K in epoch K+1, and the valid split from the first, so only shard0 has valid and
   test). Each shard resumes as a run of clear-prepare does (its work in DATA/work/shardK): a
   finished shard is skipped, an interrupted one goes on from its last finished step.
   DATA/summary.json covers the shards finished so far, wherever they were prepared.
"""

import json
import logging
import math
import os
from typing import Dict, List, Optional, Sequence

from .common import (RUN_ONLY_OPTIONS, PrepareError, atomic_write, check_input_files, check_out_dir_is_ours,
                     check_output_dir, file_identity, fingerprint, write_json)

logger = logging.getLogger("fairseq_clear.prepare")

#: the sample of --only-vocab is read in pieces of this size, evenly spaced in each file
SAMPLE_PIECE_BYTES = 1 << 20
#: a piece ends with the rest of its line, up to this many bytes (or the piece's size) more
SAMPLE_LINE_BYTES = 1 << 16


def deal(files: Sequence[str], shards: int) -> List[List[str]]:
    """The input files of each shard: each file, in the sorted order of their paths below the folder
    they all share (the same on every machine, in whatever order the paths were given and wherever the
    corpus is mounted), to the shard with the fewest bytes so far; empty files are left out."""
    files = [f for f in files if os.path.getsize(f) > 0]
    if len(files) < shards:
        raise PrepareError(f"--shards {shards}: the training inputs are {len(files)} file(s) that are not empty; "
                           f"shards are made of whole files, so give at least {shards} (e.g. split -n l/{shards} FILE)")
    if len(set(files)) < len(files):
        twice = next(f for f in files if files.count(f) > 1)
        raise PrepareError(f"RAW: '{twice}' is given twice; each file goes to one shard")
    files = sorted(files, key=_relative_names(files).get)
    dealt: List[List[str]] = [[] for _ in range(shards)]
    sizes = [0] * shards
    for path in files:
        k = min(range(shards), key=lambda i: (sizes[i], i))
        dealt[k].append(path)
        sizes[k] += os.path.getsize(path)
    return dealt


def _relative_names(files: Sequence[str]) -> Dict[str, str]:
    """Each file's path below the folder all ``files`` share (the name every machine gives it)."""
    root = os.path.commonpath([os.path.abspath(f) for f in files]) if len(files) > 1 else ""
    return {f: os.path.relpath(os.path.abspath(f), root) if root else os.path.basename(f) for f in files}


#: DATA/work/shards.json: how the first shard run dealt the inputs (every later run must deal the same)
LAYOUT = "shards.json"


def check_layout(out_dir: str, dealt: List[List[str]]) -> None:
    """Refuse a run that deals other shards than the runs before it into ``out_dir`` (another --shards, or
    input files added, removed or changed): the shards of two layouts hold the same files, which a
    training on all of them would read twice. The first run records its layout."""
    names = _relative_names([f for files in dealt for f in files])
    layout = {"shards": len(dealt), "files": [[[names[f], os.path.getsize(f)] for f in files] for files in dealt]}
    path = os.path.join(out_dir, "work", LAYOUT)
    try:
        with open(path, encoding="utf-8") as f:
            earlier = json.load(f)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json(path, layout)
        return
    except (OSError, ValueError) as e:
        raise PrepareError(f"OUT_DIR: cannot read '{path}' ({e}): move it away or choose another DATA") from None
    if earlier == layout:
        return
    if earlier.get("shards") != layout["shards"]:
        why = f"was dealt into {earlier.get('shards')} shards, this run asks for --shards {layout['shards']}"
    else:
        why = "was dealt from other input files (added, removed or of another size) than this run's"
    raise PrepareError(f"--shards: '{out_dir}' {why} ({path}); shards of two layouts would hold the same "
                       "files: give the --shards and RAW of its first run, or another DATA")


def parse_shard_ids(text: Optional[str], shards: int) -> List[int]:
    """``--shard-ids 0,3`` (or ``2-5``); None: all of them."""
    if text is None:
        return list(range(shards))
    ids = []
    for part in str(text).split(","):
        try:
            if "-" in part.strip()[1:]:
                a, b = (int(x) for x in part.split("-", 1))
                ids.extend(range(a, b + 1) if a <= b else [None, a, b])
            else:
                ids.append(int(part))
        except ValueError:
            raise PrepareError(f"--shard-ids: '{text}' is not a list of shard numbers such as 0,3 or 2-5") from None
    if None in ids:
        a, b = ids[ids.index(None) + 1:ids.index(None) + 3]
        raise PrepareError(f"--shard-ids: '{a}-{b}' is a range from high to low; write {b}-{a}")
    bad = [i for i in ids if not 0 <= i < shards]
    if bad:
        raise PrepareError(f"--shard-ids: {bad[0]} is not a shard of --shards {shards} (0 to {shards - 1})")
    return sorted(set(ids))


def shard_dirs(out_dir: str, k: int):
    """(work, data-bin) of shard ``k``."""
    return os.path.join(out_dir, "work", f"shard{k}"), os.path.join(out_dir, "data-bin", f"shard{k}")


def prepare_shards(Pipeline, inputs: Sequence[str], out_dir: str, shards: int, shard_ids: Optional[str] = None,
                   defaults: Optional[Dict] = None, **options) -> Dict:
    """Prepare the shards ``shard_ids`` of ``shards`` with ``Pipeline`` (pipeline.Pipeline, passed in by
    pipeline.prepare with its option ``defaults``: this module is a step of it, not above it); returns the
    summary of all shards finished."""
    if shards < 1:
        raise PrepareError(f"--shards must be >= 1, got {shards}")
    if not options.get("tokenizer_from"):
        raise PrepareError("--shards: give --tokenizer-from VOCAB/data-bin (made once by clear-prepare RAW... "
                           "VOCAB --only-vocab) so that every shard has the same dict.txt")
    ids = parse_shard_ids(shard_ids, shards)
    out_dir = os.path.abspath(out_dir)
    files = check_input_files(list(inputs), "RAW", out_dir)
    check_output_dir(out_dir)
    check_out_dir_is_ours(out_dir)
    plain = [p for p in (os.path.join(out_dir, "work", "steps"), os.path.join(out_dir, "data-bin", "dict.txt"))
             if os.path.exists(p)]
    if plain:
        raise PrepareError(f"OUT_DIR: '{out_dir}' holds the output of a clear-prepare run without --shards "
                           f"('{plain[0]}'); shards go to a DATA of their own: choose another one")
    empty = [f for f in files if os.path.getsize(f) == 0]
    if empty:
        logger.warning("RAW: %d empty file(s) left out of the shards: %s", len(empty), ", ".join(empty[:5]))
    dealt = deal(files, shards)
    check_layout(out_dir, dealt)
    ran = {}
    for k in ids:
        shard_options = dict(options)
        if k:  # fairseq reads valid (and test) from the first path of DATA only
            shard_options.update(valid=None, test=None, valid_size=0, test_size=0)
        work, data_bin = shard_dirs(out_dir, k)
        os.makedirs(os.path.dirname(data_bin), exist_ok=True)
        logger.info("shard %d of %d: %d file(s)", k, shards, len(dealt[k]))
        steps = Pipeline(dealt[k], out_dir, work=work, data_bin=data_bin, needs_valid=not k,
                         **shard_options).run()["steps"]
        ran[k] = [name for name, st in steps.items() if st["status"] == "ran"]
    return write_summary(out_dir, shards, dealt, ran, dict(defaults or {}, **options), empty)


#: options a shard's summary records that may differ between shards of one corpus (or machines)
_PER_SHARD = ("tokenizer_from", "valid", "test", "valid_size", "test_size") + RUN_ONLY_OPTIONS


def _made_otherwise(summary: Dict, options: Dict, dict_sha256: Optional[str]) -> Optional[str]:
    """Why a finished shard does not belong to this run's (other options, another dict.txt), or None."""
    recorded = summary.get("options") or {}
    for key, value in options.items():
        value = json.loads(json.dumps(value))  # as the summary holds it (lists, not tuples)
        # None: decided by the run (--unk-token from the input's format)
        if key not in _PER_SHARD and value is not None and key in recorded and recorded[key] != value:
            return f"--{key.replace('_', '-')} {recorded[key]} (this run: {value})"
    made_with = (summary.get("dictionary") or {}).get("sha256")
    if dict_sha256 and made_with and made_with != dict_sha256:
        return "another dict.txt than --tokenizer-from's now"
    return None


def _other_inputs(summary: Dict, files: List[str]) -> Optional[str]:
    """Why a shard's summary was made from other files than ``files`` (dealt to it now), or None."""
    made = sorted((os.path.basename(f["path"]), f["bytes"])
                  for f in ((summary.get("inputs") or {}).get("train") or {}).get("per_file", []))
    now = sorted((os.path.basename(f), os.path.getsize(f)) for f in files)
    if made == now:
        return None
    return f"other input files ({len(made)} then, {len(now)} dealt to it now)"


def write_summary(out_dir: str, shards: int, dealt: List[List[str]], ran: Dict[int, List[str]],
                  options: Optional[Dict] = None, empty_inputs: Sequence[str] = ()) -> Dict:
    """DATA/summary.json: every shard's summary found there (finished here or on another machine) that
    was made with this run's options and dict.txt (``options``, every one of them; the others are listed as made otherwise
    and still to do); ``ran``: the steps this run ran, of each shard it did (none: the shard was finished)."""
    from .. import vocabulary

    options = options or {}
    vocab = options.get("tokenizer_from")
    dict_sha256 = vocabulary.sha256(os.path.join(vocab, "dict.txt")) if vocab else None
    done, missing, otherwise = {}, [], {}
    for k in range(shards):
        path = os.path.join(shard_dirs(out_dir, k)[0], "summary.json")
        try:
            with open(path, encoding="utf-8") as f:
                summary = json.load(f)
        except (OSError, ValueError):
            missing.append(k)
            continue
        why = _made_otherwise(summary, options, dict_sha256) or _other_inputs(summary, dealt[k])
        if why:
            otherwise[k] = why
            missing.append(k)
        else:
            done[k] = summary
    data = ":".join(shard_dirs(out_dir, k)[1] for k in range(shards))
    totals = {key: sum(s["splits"].get("train", {}).get(key, 0) for s in done.values())
              for key in ("documents", "sentences", "tokens", "unk_tokens")}
    lines = {kind: {} for kind in ("dropped", "altered", "normalized")}
    for s in done.values():  # every shard's counts, added up (a line belongs to one shard)
        for kind, reasons in (s.get("lines") or {}).items():
            for reason, n in reasons.items():
                lines.setdefault(kind, {})[reason] = lines.setdefault(kind, {}).get(reason, 0) + n
    summary = {
        "out_dir": out_dir, "shards": shards, "finished": sorted(done), "missing": missing,
        "made_otherwise": otherwise,
        "data": data,
        "train_with": f"fairseq-train {data} --user-dir {user_dir()} --task clear --criterion clear ...",
        "train": totals,
        # valid and test are shard0's alone (fairseq reads them from the first path)
        "splits": {split: st for split, st in (done.get(0, {}).get("splits") or {}).items() if split != "train"},
        "lines": {kind: dict(sorted(reasons.items())) for kind, reasons in lines.items()},
        "warnings": [f"shard{k}: {w}" for k, s in sorted(done.items()) for w in s.get("warnings") or []],
        "empty_inputs_left_out": list(empty_inputs),
        "rate": {k: s.get("rate") for k, s in done.items()},
        "inputs": {k: files for k, files in enumerate(dealt)},
        "steps_run_now": ran,
        "summaries": {k: s["summary"] for k, s in done.items()},
    }
    write_json(os.path.join(out_dir, "summary.json"), summary)
    return summary


def user_dir() -> str:
    """The plugin's folder, for the --user-dir of the commands a summary suggests (a path that works
    from any folder, unlike the package's name)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def format_shards_summary(s: Dict) -> str:
    lines = [f"shards finished: {', '.join(map(str, s['finished'])) or 'none'} of {s['shards']}"
             + (f"; still to do: {', '.join(map(str, s['missing']))}" if s["missing"] else "")]
    for k, why in s.get("made_otherwise", {}).items():
        lines.append(f"shard{k}: made with {why}: to be prepared again (--shard-ids {k})")
    t = s["train"]
    lines.append(f"train (finished shards): {t['documents']:,} documents, {t['sentences']:,} sentences, "
                 f"{t['tokens']:,} tokens, {t['unk_tokens']:,} <unk>")
    for split, st in s.get("splits", {}).items():
        lines.append(f"{split} (shard0): {st['documents']:,} documents, {st['sentences']:,} sentences, "
                     f"{st['tokens']:,} tokens")
    for kind, reasons in s.get("lines", {}).items():
        lines.append(f"lines {kind} (finished shards): "
                     + (", ".join(f"{r} {n:,}" for r, n in reasons.items()) if reasons else "none"))
    if s.get("empty_inputs_left_out"):
        lines.append(f"empty input files left out: {len(s['empty_inputs_left_out'])}")
    lines += [f"warning: {w}" for w in s.get("warnings", [])]
    for k, rate in s["rate"].items():
        if rate:
            lines.append(f"shard{k}: {rate['input_mb']:,.1f} MB, {rate['mb_per_s_per_worker']:.2f} MB/s per worker")
    for k, steps in s["steps_run_now"].items():
        lines.append(f"shard{k}: " + (f"ran {', '.join(steps)}" if steps else "finished earlier, skipped"))
    lines.append(f"train with: {s['train_with']}")
    lines.append(f"summary: {os.path.join(s['out_dir'], 'summary.json')}")
    return "\n".join(lines)


def sample_inputs(files: Sequence[str], dest: str, sample_mb: float) -> List[str]:
    """``sample_mb`` MB of the inputs, each file's share in proportion to its size, read in pieces
    of whole lines evenly spaced through it; one sample file per input, named after it (its input
    format is detected as for the file) and after what it was cut from (a rerun reuses it, and the
    pipeline's steps with it)."""
    os.makedirs(dest, exist_ok=True)
    total = sum(os.path.getsize(f) for f in files) or 1
    budget = int(sample_mb * 1e6)
    out = []
    for path in files:
        size = os.path.getsize(path)
        share = min(size, budget * size // total)
        target = os.path.join(dest, f"{fingerprint('sample', file_identity(path), share)[:12]}-{os.path.basename(path)}")
        out.append(target)
        if os.path.isfile(target):
            continue
        pieces = max(1, -(-share // SAMPLE_PIECE_BYTES))
        piece = share // pieces
        limit = max(piece, SAMPLE_LINE_BYTES)
        with open(path, "rb") as f, atomic_write(target, "wb") as o:
            for p in range(pieces):
                f.seek(p * size // pieces)
                if p:
                    _rest_of_line(f, limit)  # to a line start (or at most ``limit`` further, in a long line)
                o.write(_whole_characters(f.read(piece), f, limit))
                o.write(b"\n")  # the piece ends a document
    return out


def _rest_of_line(f, limit: int) -> bytes:
    """The rest of the current line, at most ``limit`` bytes (a file of one long line, or of '\\r' line
    ends, is never read whole into memory)."""
    return f.readline(limit)


def _whole_characters(head: bytes, f, limit: int) -> bytes:
    """``head`` and the rest of its line (at most ``limit`` bytes more), without the UTF-8 continuation
    bytes a seek into a long line may have put first, nor a character cut at the end."""
    if head[:1] and 0x80 <= head[0] < 0xC0:
        head = head.lstrip(bytes(range(0x80, 0xC0)))
    data = head + _rest_of_line(f, limit)
    if data.endswith(b"\n"):
        return data
    k = len(data) - 1  # the last character's first byte
    while k > 0 and 0x80 <= data[k] < 0xC0 and len(data) - k < 4:
        k -= 1
    if k >= 0 and data[k] >= 0xC0 and len(data) - k < (2 if data[k] < 0xE0 else 3 if data[k] < 0xF0 else 4):
        data = data[:k]
    return data


def prepare_vocab(Pipeline, inputs: Sequence[str], out_dir: str, sample_mb: Optional[float] = None,
                  **options) -> Dict:
    """--only-vocab: the tokenizer and dict.txt from (a sample of) the training inputs, with ``Pipeline``."""
    out_dir = os.path.abspath(out_dir)
    files = check_input_files(list(inputs), "RAW", out_dir)
    check_output_dir(out_dir)
    if sample_mb is not None:
        if not 0 < sample_mb < math.inf:  # nan fails too
            raise PrepareError(f"--sample-mb must be > 0 and finite, got {sample_mb}")
        files = sample_inputs(files, os.path.join(out_dir, "work", "sample"), sample_mb)
    options.update(valid=None, test=None, valid_size=0, test_size=0)
    summary = Pipeline(files, out_dir, only_vocab=True, **options).run()
    summary["train_with"] = (f"clear-prepare RAW... DATA --tokenizer-from {summary['data_bin']} --shards N "
                             "--shard-ids ... (the tokenizer and dict.txt of every shard)")
    write_json(os.path.join(out_dir, "summary.json"), summary)  # its data-bin has no .bin to train on
    return summary
