"""Shared pieces of the preprocessing pipeline: errors, step markers, output checks,
bounded parallel maps and progress bars.

Nothing here imports fairseq or torch, so that worker processes stay light.
"""

import collections
import errno
import gc
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union
from ..atomic_files import atomic_write, remove_stale_tmp, tmp_name, write_json  # noqa: F401 (the steps' names)
from ..errors import FairseqClearError

logger = logging.getLogger(__name__)


class PrepareError(FairseqClearError, ValueError):
    """Bad input or configuration; the message names the option or file."""


# ---- counting what happens to lines ---------------------------------------------------

class LineReport:
    """Counts of lines dropped, altered and normalised, each by reason.

    *dropped*: the line (or sentence) is not in the output.
    *altered*: the line is in the output, with its content changed.
    *normalized*: only a representation detail changed (line ending, byte-order mark).
    """

    KINDS = ("dropped", "altered", "normalized")

    def __init__(self, data: Optional[Dict[str, Dict[str, int]]] = None):
        self.counts = {k: collections.Counter() for k in self.KINDS}
        if data:
            for kind in self.KINDS:
                self.counts[kind].update(data.get(kind, {}))

    def add(self, kind: str, reason: str, n: int = 1):
        if n:
            self.counts[kind][reason] += n

    def update(self, other: "LineReport"):
        for kind in self.KINDS:
            self.counts[kind].update(other.counts[kind])

    def to_dict(self) -> Dict[str, Dict[str, int]]:
        return {k: dict(sorted(self.counts[k].items())) for k in self.KINDS}

    def __getitem__(self, kind):
        return self.counts[kind]


# ---- resumable steps --------------------------------------------------------------------

#: options that do not change what the pipeline writes
RUN_ONLY_OPTIONS = ("workers", "progress", "remove_intermediate", "force")

#: Bump when a change of the code changes what a step writes: old markers then no longer match.
PIPELINE_VERSION = 2  # 2: a line of Unicode whitespace only is a blank line (text.is_blank)


def fingerprint(*parts) -> str:
    """A stable hash of JSON-serialisable parts (options, input identities, upstream hashes)."""
    blob = json.dumps([PIPELINE_VERSION, parts], sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:24]


def file_identity(path: str, root: Optional[str] = None) -> Dict:
    """What identifies an input file for resuming: its path, size and modification time; a path below
    ``root`` (the output folder: --only-vocab's sample) relative to it, so that a copied or moved output
    folder knows its own inputs."""
    st = os.stat(path)
    path = os.path.abspath(path)
    if root and path.startswith(os.path.join(os.path.abspath(root), "")):
        path = os.path.join("OUT_DIR", os.path.relpath(path, root))
    return {"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


class StepMarkers:
    """Done-markers of the pipeline steps: ``WORK/steps/<name>.json``.

    A marker is written after a step's outputs have been renamed into place, and
    holds the step's fingerprint (a hash of its inputs and options, chained over
    the upstream steps), its outputs and its statistics. A step counts as done only
    if its marker's fingerprint matches and every output exists with the recorded
    size, so a half-written or stale output is never taken for a finished one. Outputs below
    ``root`` (the output folder) are recorded relative to it, so that a copied or moved folder
    checks its own files, not the original's.
    """

    def __init__(self, directory: str, root: str):
        self.directory, self.root = directory, os.path.abspath(root)
        os.makedirs(directory, exist_ok=True)

    def outputs(self, marker: Optional[Dict]) -> Dict[str, Optional[int]]:
        """A marker's outputs: absolute path -> size (None: a folder)."""
        # os.path.join keeps an absolute path as it is (outputs outside root; markers of older versions)
        return {os.path.join(self.root, p): size for p, size in (marker or {}).get("outputs", {}).items()}

    def path(self, name: str) -> str:
        return os.path.join(self.directory, f"{name}.json")

    def load(self, name: str) -> Optional[Dict]:
        try:
            with open(self.path(name), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def done(self, name: str, fp: str) -> Optional[Dict]:
        marker = self.load(name)
        if not marker or marker.get("fingerprint") != fp:
            return None
        for path, size in self.outputs(marker).items():
            if not os.path.exists(path):
                return None
            if size is not None and os.path.isfile(path) and os.path.getsize(path) != size:
                return None
        return marker

    def mark(self, name: str, fp: str, outputs: Iterable[str], stats: Dict, seconds: float,
             **extra):
        outputs = {self._key(p): (os.path.getsize(p) if os.path.isfile(p) else None) for p in outputs}
        write_json(
            self.path(name),
            {"step": name, "fingerprint": fp, "outputs": outputs, "stats": stats,
             "seconds": round(seconds, 3), **extra},
        )

    def _key(self, path: str) -> str:
        path = os.path.abspath(path)
        inside = os.path.commonpath([path, self.root]) == self.root
        return os.path.relpath(path, self.root) if inside else path

    def clear(self, name: str):
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            pass


# ---- parallel map with bounded memory ---------------------------------------------------

def _mp_context():
    # fork: workers inherit the loaded modules (and the sentencepiece / Punkt state
    # set up by the initializer) instead of re-importing them.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


@contextmanager
def paused_gc():
    """Python's cycle collector off for a block of work (restored after). A block's work makes many
    containers (a list per line) and frees them by reference counting; the collector, triggered by
    their allocation, would walk them again and again, more the larger the block."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _call_without_gc(fn: Callable, item):
    with paused_gc():
        return fn(item)


def ordered_parallel_map(
    fn: Callable,
    items: Iterable,
    workers: int,
    initializer: Optional[Callable] = None,
    initargs=(),
    max_in_flight: Optional[int] = None,
) -> Iterator:
    """``map(fn, items)`` in ``workers`` processes, results in input order.

    Unlike ``Pool.imap``, at most ``max_in_flight`` items are read ahead of the
    consumer, so memory stays constant however long ``items`` is. With one worker
    everything runs in this process (no pickling, no start-up cost).
    """
    if workers <= 1:
        if initializer is not None:
            initializer(*initargs)
        for item in items:
            result = _call_without_gc(fn, item)
            yield result
        return
    max_in_flight = max_in_flight or 3 * workers
    # forked workers share this process's objects copy-on-write; frozen, their garbage collector
    # leaves them untouched, else it copies them page by page and memory grows with the run's length
    gc.freeze()
    pool = _mp_context().Pool(workers, initializer=initializer, initargs=initargs)
    try:
        pending = collections.deque()
        for item in items:
            pending.append(pool.apply_async(_call_without_gc, (fn, item)))
            if len(pending) >= max_in_flight:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
        pool.close()
    finally:
        pool.terminate()
        pool.join()
        gc.unfreeze()


# ---- progress ---------------------------------------------------------------------------

def progress(total=None, desc="", unit="B", enabled=True, **kwargs):
    """A tqdm bar on stderr; in logs (no terminal) it redraws every 30 s instead of 0.1 s."""
    from tqdm import tqdm

    tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit == "B",
        unit_divisor=1000,  # MB as the summary's (1e6 bytes), not MiB
        disable=not enabled,
        mininterval=0.2 if tty else 30.0,
        dynamic_ncols=True,
        file=sys.stderr,
        **kwargs,
    )


def check_out_dir_is_ours(path: str):
    """Refuse an OUT_DIR whose ``work/`` or ``summary.json`` clear-prepare did not write (a rerun
    replaces and removes files there): ours has ``work/steps`` (written first, when a run starts),
    a shard's ``work/shardK/steps``, the shards' layout ``work/shards.json`` or the vocabulary sample
    ``work/sample``."""
    work = os.path.join(path, "work")
    if os.path.isdir(work):
        names = os.listdir(work)
        if not names or "steps" in names or "sample" in names or "shards.json" in names or any(
                n.startswith("shard") and os.path.isdir(os.path.join(work, n, "steps")) for n in names):
            return
        raise PrepareError(f"OUT_DIR: '{work}' exists and was not written by clear-prepare (no steps/ in it); "
                           "a run writes and removes files there: move it away or choose another OUT_DIR")
    if os.path.lexists(work):
        raise PrepareError(f"OUT_DIR: '{work}' exists and is not a folder; move it away or choose another OUT_DIR")
    if os.path.lexists(os.path.join(path, "summary.json")):
        raise PrepareError(f"OUT_DIR: '{os.path.join(path, 'summary.json')}' was not written by clear-prepare "
                           "(no work/ beside it) and a run replaces it: move it away or choose another OUT_DIR")


def check_output_dir(path: str, option: str = "OUT_DIR"):
    """Create ``path`` and check that it is writable, failing at once with its name."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise PrepareError(f"{option}: cannot create output directory '{path}' ({e.strerror})") from None
    if not os.path.isdir(path):
        raise PrepareError(f"{option}: '{path}' exists and is not a directory")
    problem = not_writable(path)
    if problem:
        raise PrepareError(f"{option}: output directory '{path}' is not writable ({problem})")


def not_writable(directory: str) -> Optional[str]:
    """Why no file can be created in ``directory`` (None when one can): a file is created and
    removed, since ``os.access`` says yes to root on a read-only or pseudo file system."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return e.strerror
    return None


#: what clear-prepare writes in OUT_DIR (never read back as input when OUT_DIR is, or is in, an input folder)
OUT_DIR_ENTRIES = ("work", "data-bin", "summary.json")


def check_input_files(paths: List[str], option: str, exclude: Optional[str] = None) -> List[str]:
    """Expand directories (all regular files below, sorted, hidden ones left out) and check that every
    file is readable. ``exclude``, the output directory: what it writes there (:data:`OUT_DIR_ENTRIES`)
    is never an input; a folder below an input folder is left out whole, and an input folder that is
    the output directory itself gives its other files (none: it is left out, said in the log)."""
    files = []
    exclude = os.path.abspath(exclude) if exclude else None
    ours = {os.path.join(exclude, n) for n in OUT_DIR_ENTRIES} if exclude else set()
    for path in paths:
        if not os.path.exists(path):
            raise PrepareError(f"{option}: input '{path}' does not exist")
        if os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                                 and (os.path.abspath(os.path.join(root, d)) != exclude
                                      or os.path.abspath(path) == exclude)
                                 and os.path.abspath(os.path.join(root, d)) not in ours)
                found.extend(os.path.join(root, n) for n in sorted(names) if not n.startswith(".")
                             and os.path.abspath(os.path.join(root, n)) not in ours)
            if not found and os.path.abspath(path) == exclude:
                logger.info("%s: '%s' is OUT_DIR and holds nothing but its outputs: left out", option, path)
                continue
            if not found:
                raise PrepareError(f"{option}: input directory '{path}' holds no files")
            files.extend(found)
        else:
            files.append(path)
    for f in files:
        if not os.path.isfile(f):
            raise PrepareError(f"{option}: input '{f}' is not a regular file")
        if not os.access(f, os.R_OK):
            raise PrepareError(f"{option}: input '{f}' is not readable")
    return files


# ---- outputs checked before the work ----------------------------------------------------

def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same inode when both exist (symlinks, hard links),
    else the same real path."""
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(outputs: Dict[str, str], inputs: Dict[str, Union[None, str, Sequence[str]]]) -> Dict[str, str]:
    """Refuse, before any work, output files that cannot be written or would destroy another file:
    a directory, a missing or unwritable parent directory, an output that is an input or another
    output (compared as files: via symlinks and hard links too). ``outputs`` and ``inputs`` map an
    option (its label in the message) to a path; an input option may name several, or None.
    Returns the outputs as absolute paths."""
    checked = {}
    for option, path in outputs.items():
        path = os.path.abspath(path)
        if os.path.isdir(path):
            raise PrepareError(f"{option} '{path}' is a directory; give a file name")
        directory = os.path.dirname(path)
        if not os.path.exists(directory):
            raise PrepareError(f"{option} '{path}': directory '{directory}' does not exist")
        if not os.path.isdir(directory):
            raise PrepareError(f"{option} '{path}': '{directory}' is not a directory")
        problem = not_writable(directory)
        if problem or (os.path.exists(path) and not os.access(path, os.W_OK)):
            raise PrepareError(f"{option} '{path}' is not writable ({problem or 'a read-only file'})")
        for other, seen in checked.items():
            if same_file(path, seen):
                raise PrepareError(f"{other} '{seen}' and {option} '{path}' are the same file; give each its own path")
        checked[option] = path
    for option, path in checked.items():
        for source, paths in inputs.items():
            for given in [paths] if isinstance(paths, str) else paths or []:
                if same_file(path, given):
                    raise PrepareError(f"{option} '{path}' is the same file as {source} '{given}'; "
                                       f"it would overwrite the input")
    return checked


# ---- a full disk ------------------------------------------------------------------------

class DiskFullError(FairseqClearError, OSError):
    """No space left where we write; the message names the place (and its option), the space
    needed when known and what is free. An ``OSError`` still, for callers that catch that."""

    def __init__(self, path: str, needed: Optional[int] = None, hint: str = "", option: str = ""):
        OSError.__init__(self, errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        self.path, self.needed, self.hint, self.option = path, needed, hint, option

    def __str__(self):
        space = []
        if self.needed is not None:
            space.append(f"{self.needed:,} bytes needed")
        try:
            directory = self.path if os.path.isdir(self.path) else os.path.dirname(os.path.abspath(self.path))
            space.append(f"{shutil.disk_usage(directory).free:,} free")
        except OSError:
            pass
        where = f"{self.option} '{self.path}'" if self.option else f"'{self.path}'"
        return (f"{where}: no space left on device" + (f" ({', '.join(space)})" if space else "")
                + (f"; {self.hint}" if self.hint else ""))


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


@contextmanager
def disk_full_reported(path: str, option: str = "", needed: Optional[int] = None, hint: str = ""):
    """A full disk (or quota) inside the block becomes one :class:`DiskFullError` naming ``path``
    and its ``option`` (with :func:`atomic_write`, the previous file stays as it was)."""
    try:
        yield
    except DiskFullError:
        raise
    except OSError as e:
        if e.errno not in DISK_FULL:
            raise
        raise DiskFullError(path, needed, hint, option) from None


def allocate(fd: int, offset: int, length: int) -> None:
    """Claim ``length`` bytes of the file ``fd`` from ``offset`` now, so that a full disk is an
    ``OSError`` here rather than a SIGBUS ("Bus error") when a memory map of a sparse file
    touches a page that cannot be backed. ``posix_fallocate`` where it exists and the file system
    supports it, else zeros written."""
    if length <= 0:
        return
    if hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, offset, length)
            return
        except OSError as e:
            if e.errno in DISK_FULL:
                raise
    _write_zeros(fd, offset, length)


def _write_zeros(fd: int, offset: int, length: int, block: int = 1 << 20) -> None:
    zeros = bytes(min(block, length))
    end = offset + length
    while offset < end:
        offset += os.pwrite(fd, zeros[:end - offset], offset)


# ---- progress in a log ------------------------------------------------------------------

#: seconds between two progress lines when stderr is not a terminal (a log file)
PROGRESS_LOG_SECONDS = 30.0


class LoggedProgress:
    """A loop's progress: a tqdm bar on a terminal; otherwise (stderr to a log file, where a bar
    shows nothing) a log line every :data:`PROGRESS_LOG_SECONDS` (count done / total, rate)
    and one at the end."""

    def __init__(self, total: Optional[int], desc: str, unit: str = "rows", log: logging.Logger = logger,
                 interval: Optional[float] = None, enabled: bool = True):
        self.total, self.desc, self.unit, self.log = total, desc, unit, log
        self.interval = PROGRESS_LOG_SECONDS if interval is None else interval
        self.enabled = enabled
        self.done = 0
        self.start = self.last = time.time()
        tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.bar = progress(total, desc, unit=unit) if tty and enabled else None

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled and time.time() - self.last >= self.interval:
            self._line()

    def _line(self, final: bool = False) -> None:
        self.last = now = time.time()
        seconds = max(now - self.start, 1e-9)
        rate = self.done / seconds
        if self.unit == "B":  # bytes of text: MB and MB/s, as the bar shows them
            done, of, unit = f"{self.done / 1e6:.1f}", f"/{self.total / 1e6:.1f}" if self.total else "", "MB"
            speed = f"{rate / 1e6:.2f} MB/s"
        else:
            done, of, unit = str(self.done), f"/{self.total}" if self.total is not None else "", self.unit
            speed = f"{rate:.0f} {self.unit}/s"
        eta = ""
        if not final and self.total and rate > 0:
            eta = f", ETA {max(self.total - self.done, 0) / rate:.0f} s"
        self.log.info("%s: %s%s %s%s (%s%s)", self.desc, done, of, unit,
                      f" in {seconds:.1f} s" if final else "", speed, eta)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            self._line(final=True)

    def __enter__(self):
        return self

    def __exit__(self, kind, *rest):
        if kind is None:
            self.close()
        elif self.bar is not None:
            self.bar.close()
