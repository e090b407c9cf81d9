"""``clear-embed``: a file of sentences (one per line) → a .npy matrix of sentence vectors.

    clear-embed --checkpoint checkpoints/checkpoint_best.pt --data data-bin \\
        --input sentences.txt --output vectors.npy [--tsv vectors.tsv]

Row i of the output is the vector of line i of the input; every line counts,
an empty line included (it is embedded as ``<s></s>``), so rows and lines
always match. The .tsv (one vector per line, tab-separated) is the format of
TensorBoard's embedding projector, with the input file as its metadata.
"""

import argparse
import io
import logging
import os
import sys
import tempfile
import time

import numpy as np
import torch

from ..errors import NotUtf8Error
from ..preprocessing.common import LoggedProgress, same_file
from .hub_args import add_checkpoint_args, add_embedding_args, fail, load_hub, setup_logging
from ..errors import FairseqClearError
from . import command

logger = logging.getLogger("clear-embed")


def get_parser():
    parser = argparse.ArgumentParser(
        prog="clear-embed",
        description="Embed a file of sentences (one per line) with a trained checkpoint; "
        "writes a float32 .npy matrix, row i = line i. Streams: memory does not grow with the file.",
    )
    add_checkpoint_args(parser)
    add_embedding_args(parser, "cls ([CLS], the paper) or mean (default: the model's --sentence-pooling)")
    io = parser.add_argument_group("input and output")
    io.add_argument("--input", required=True, metavar="FILE", help="UTF-8 text, one sentence per line ('-' = stdin)")
    io.add_argument("--output", required=True, metavar="FILE",
                    help="the .npy file to write (N x dim, float32), at exactly this path")
    io.add_argument("--tsv", metavar="FILE", help="also write the vectors as tab-separated text, one per line")
    io.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                    help="scale every vector to unit length (default: the model's own: yes for a "
                    "sentence-transformers model with a Normalize module, recorded by clear-import-hf)")
    io.add_argument("--truncate-dim", type=int, default=None, metavar="D",
                    help="keep the first D dimensions of every vector (before --normalize): for a model "
                    "trained with --matryoshka-dims, one of its trained sizes (default: all)")
    run = parser.add_argument_group("running")
    run.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if available unless --cpu)")
    run.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                     help="autocast precision of the forward pass (fp16: GPU only; default: fp32)")
    run.add_argument("--fp16", action="store_true", help="same as --precision fp16")
    run.add_argument("--chunk-size", type=int, default=10000,
                     help="sentences read, embedded and written at a time (memory is bounded by it; default: 10000)")
    run.add_argument("--log-interval", type=float, default=30.0,
                     help="seconds between progress lines when stderr is not a terminal (default: 30)")
    return parser


def _lines(path: str):
    # only '\n' ends a line, as for wc -l and the row count: not splitlines() (U+2028,
    # U+0085, ...), and newline="\n" so that a lone '\r' inside a line does not either
    if path == "-":
        buffer = getattr(sys.stdin, "buffer", None)  # a StringIO in tests has none
        stdin = sys.stdin if buffer is None else io.TextIOWrapper(buffer, encoding="utf-8", newline="\n")
        for line in stdin:
            yield line.rstrip("\n").rstrip("\r")
        return
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            yield line.rstrip("\n").rstrip("\r")


def _chunks(lines, size):
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def check_output_path(path: str, option: str) -> str:
    """The path itself (never a renamed one): refuse a directory or an unwritable place, before any work."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise OutputError(f"{option} '{path}' is a directory; give a file name, e.g. {os.path.join(path, 'vectors.npy')}")
    existing = os.path.dirname(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputError(f"{option} '{path}': '{existing}' is a file, not a directory")
    if not os.access(existing, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OutputError(f"{option} '{path}' is not writable")
    return path


class OutputError(FairseqClearError, ValueError):
    """An output path cannot be written; the message names the option."""


def temp_sibling(path: str, mode: str = "w", **kwargs):
    """(open file, its path): a new temporary file of its own in ``path``'s directory, to be renamed
    over ``path`` once complete, so that two writers, or two runs, never share one. Its permissions
    are those a plain ``open(path, "w")`` would give (mkstemp's are 0600)."""
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f"{name}.", suffix=".partial", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        return os.fdopen(fd, mode, **kwargs), tmp
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise


class NpyRowWriter:
    """Append float32 rows to a .npy file of unknown final length, in constant memory.

    Rows go to a temporary sibling after a fixed-size header that is rewritten
    with the real row count at the end; the file then replaces ``path`` in one
    rename, so ``path`` is never a partial matrix.
    """

    HEADER_BYTES = 128  # room for any row count

    def __init__(self, path: str, dim: int):
        self.path, self.dim, self.rows = path, dim, 0
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.f, self.tmp = temp_sibling(path, "wb")
        self.f.write(self._header(0))

    def _header(self, rows):
        text = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, self.dim)
        body = text.ljust(self.HEADER_BYTES - 10 - 1) + "\n"
        return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body.encode("latin1")

    def write(self, vectors: np.ndarray):
        self.f.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
        self.rows += len(vectors)

    def close(self):
        self.f.seek(0)
        self.f.write(self._header(self.rows))
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        os.replace(self.tmp, self.path)

    def abort(self):
        self.f.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)  # ours: created in __init__


def _count_lines(path):
    if path == "-":
        return None
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) + (
            1 if os.path.getsize(path) and not _ends_with_newline(path) else 0)


def _ends_with_newline(path):
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


@command
def main(argv=None):
    setup_logging()
    args = get_parser().parse_args(argv)
    if args.fp16:
        args.precision = "fp16"
    if args.chunk_size < 1:
        fail(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if args.batch_size < 1:
        fail(f"--batch-size must be >= 1, got {args.batch_size}")
    if not args.log_interval >= 0:  # NaN included
        fail(f"--log-interval must be >= 0 seconds, got {args.log_interval}")
    if args.input != "-" and not os.path.isfile(args.input):
        fail(f"--input '{args.input}' does not exist")
    try:
        output = check_output_path(args.output, "--output")
        tsv = check_output_path(args.tsv, "--tsv") if args.tsv else None
    except OutputError as e:
        fail(e)
    if tsv and same_file(output, tsv):
        fail(f"--output '{output}' and --tsv '{tsv}' are the same file; give each its own path")
    for option, path in (("--output", output), ("--tsv", tsv)):
        if path and args.input != "-" and same_file(args.input, path):
            fail(f"{option} '{path}' is the same file as --input '{args.input}'; it would overwrite the input")
    hub = load_hub(args)
    try:
        device = args.device or ("cpu" if args.cpu or not torch.cuda.is_available() else "cuda")
        hub.embed([""], device=device, precision=args.precision)  # checks device and precision
    except ValueError as e:
        fail(f"--device/--precision: {e}")
    try:
        dim = hub.embed([""], head=args.head, truncate_dim=args.truncate_dim).shape[1]
    except ValueError as e:
        fail(f"--truncate-dim: {e}")
    trained = hub.matryoshka_dims
    if args.truncate_dim is not None and trained and args.truncate_dim not in trained:
        logger.warning("--truncate-dim %d is not one of the sizes the model was trained at (%s)",
                       args.truncate_dim, ",".join(map(str, trained)))
    total = _count_lines(args.input)
    writer = NpyRowWriter(output, dim)
    tsv_file = tsv_tmp = None
    if tsv:
        try:
            os.makedirs(os.path.dirname(tsv), exist_ok=True)
            tsv_file, tsv_tmp = temp_sibling(tsv, "w", encoding="utf-8")
        except BaseException:
            writer.abort()
            raise
    progress = LoggedProgress(total, "embedded", unit="sentences", log=logger, interval=args.log_interval)
    start = time.time()
    empty = truncated = 0
    try:
        for chunk in _chunks(_lines(args.input), args.chunk_size):
            vectors = hub.embed(chunk, pooling=args.pooling, batch_size=args.batch_size, normalize=args.normalize,
                                show_progress=False, head=args.head, precision=args.precision,
                                truncate_dim=args.truncate_dim)
            truncated += hub.num_truncated
            empty += sum(1 for s in chunk if not s.strip())
            writer.write(vectors)
            if tsv_file:
                np.savetxt(tsv_file, vectors, delimiter="\t", fmt="%.6g")
            progress.update(len(chunk))
    except UnicodeDecodeError as e:
        writer.abort()
        if tsv_file:
            tsv_file.close()
            os.unlink(tsv_tmp)
        fail(f"--input (standard input): {e}" if args.input == "-" else f"--input {NotUtf8Error(args.input, e)}")
    except BaseException:
        writer.abort()
        if tsv_file:
            tsv_file.close()
            os.unlink(tsv_tmp)
        raise
    progress.close()
    writer.close()
    if tsv_file:
        tsv_file.close()
        os.replace(tsv_tmp, tsv)
    seconds = time.time() - start
    logger.info("%d sentences from %s (%d empty, embedded as <s></s>)", writer.rows, args.input, empty)
    logger.info(
        "embedded %d sentences in %.1f s (%.0f sentences/s; %s pooling, head %s, %s; %d truncated to %d positions)",
        writer.rows, seconds, writer.rows / max(seconds, 1e-9), args.pooling or hub.default_pooling, args.head,
        args.precision, truncated, hub.model.max_positions(),
    )
    logger.info("wrote %s (%d, %d)", output, writer.rows, writer.dim)
    if tsv:
        logger.info("wrote %s", tsv)


if __name__ == "__main__":
    main()
