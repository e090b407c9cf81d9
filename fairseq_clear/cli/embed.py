"""``clear-embed``: a file of sentences (one per line) → a .npy matrix of sentence vectors.

    clear-embed --checkpoint checkpoints/checkpoint_best.pt --data data-bin \\
        --input sentences.txt --output vectors.npy [--tsv vectors.tsv]

Row i of the output is the vector of line i of the input; every line counts,
an empty line included (it is embedded as ``<s></s>``), so rows and lines
always match. The .tsv (one vector per line, tab-separated) is the format of
TensorBoard's embedding projector, with the input file as its metadata.
"""

import argparse
import contextlib
import io
import itertools
import logging
import os
import sys
import time

import numpy as np
import torch

from ..atomic_files import atomic_write
from ..errors import NotUtf8Error
from ..quantization import BINARY, PRECISIONS, SCALAR, QuantizationError, calibration_ranges, check_ranges, quantize
from ..preprocessing.common import LoggedProgress, same_file
from .hub_args import add_checkpoint_args, add_embedding_args, fail, load_hub, setup_logging
from ..errors import FairseqClearError
from . import command

logger = logging.getLogger("clear-embed")
QUANTIZED = PRECISIONS[1:]
#: the .npy dtype of each --quantize
NPY_DTYPE = {"int8": "|i1", "uint8": "|u1", "binary": "|i1", "ubinary": "|u1"}


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
    io.add_argument("--quantize", choices=QUANTIZED,
                    help="write quantized vectors (sentence-transformers' quantize_embeddings): int8/uint8 (one "
                    "byte a dimension, ranges calibrated on the first --chunk-size sentences unless "
                    "--quantize-ranges; written to OUTPUT.ranges.npy for searching with the same buckets) or "
                    "binary/ubinary (the sign bits, 8 dimensions a byte) (default: float32)")
    io.add_argument("--quantize-ranges", metavar="FILE",
                    help="int8/uint8: a (2 x dim) .npy of per-dimension minima and maxima to quantize with, "
                    "e.g. the OUTPUT.ranges.npy of the corpus's run (queries then share its buckets)")
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


def ranges_path(output: str) -> str:
    """Where --quantize int8/uint8 writes its calibration ranges: OUTPUT with .ranges.npy for .npy."""
    return (output[:-4] if output.endswith(".npy") else output) + ".ranges.npy"


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


_writers = itertools.count()  # each writer its own temporary file, even two to one path


class NpyRowWriter:
    """Append float32 (or ``dtype``) rows to a .npy file of unknown final length, in constant memory.

    Rows go to a temporary sibling (``atomic_write``) after a fixed-size header that is rewritten
    with the real row count at the end; the file then replaces ``path`` in one rename, so
    ``path`` is never a partial matrix.
    """

    HEADER_BYTES = 128  # room for any row count

    def __init__(self, path: str, dim: int, dtype: str = "<f4"):
        self.path, self.dim, self.rows, self.dtype = path, dim, 0, dtype
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._out = atomic_write(path, "wb", tag=f"npy{next(_writers)}")
        self.f = self._out.__enter__()
        self.tmp = self.f.name
        self.f.write(self._header(0))

    def _header(self, rows):
        text = "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }" % (self.dtype, rows, self.dim)
        body = text.ljust(self.HEADER_BYTES - 10 - 1) + "\n"
        return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body.encode("latin1")

    def write(self, vectors: np.ndarray):
        self.f.write(np.ascontiguousarray(vectors, dtype=self.dtype).tobytes())
        self.rows += len(vectors)

    def close(self):
        self.f.seek(0)
        self.f.write(self._header(self.rows))
        self._out.__exit__(None, None, None)  # flushed, fsync'ed, renamed over path

    def abort(self):
        stop = RuntimeError("aborted")
        self._out.__exit__(RuntimeError, stop, None)  # the temporary file removed, path untouched


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
    ranges_out = None
    if args.quantize_ranges and args.quantize not in SCALAR:
        fail(f"--quantize-ranges is for --quantize int8 or uint8, not {args.quantize or 'float32'}")
    if args.quantize in SCALAR and not args.quantize_ranges:
        try:
            ranges_out = check_output_path(ranges_path(output), "--output's ranges file")
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
    ranges = None
    if args.quantize_ranges:
        try:
            ranges = check_ranges(np.load(args.quantize_ranges, allow_pickle=False), dim,
                                  f"--quantize-ranges '{args.quantize_ranges}'")
        except (OSError, ValueError) as e:
            fail(e if isinstance(e, QuantizationError) else f"--quantize-ranges '{args.quantize_ranges}': "
                 f"not a .npy array ({e})")
    trained = hub.matryoshka_dims
    if args.truncate_dim is not None and trained and args.truncate_dim not in trained:
        logger.warning("--truncate-dim %d is not one of the sizes the model was trained at (%s)",
                       args.truncate_dim, ",".join(map(str, trained)))
    total = _count_lines(args.input)
    if args.quantize:
        writer = NpyRowWriter(output, -(-dim // 8) if args.quantize in BINARY else dim, NPY_DTYPE[args.quantize])
    else:
        writer = NpyRowWriter(output, dim)
    progress = LoggedProgress(total, "embedded", unit="sentences", log=logger, interval=args.log_interval)
    start = time.time()
    empty = truncated = 0
    with contextlib.ExitStack() as outputs:  # the TSV renamed into place at its end, removed on an error
        try:
            tsv_file = None
            if tsv:
                os.makedirs(os.path.dirname(tsv), exist_ok=True)
                tsv_file = outputs.enter_context(atomic_write(tsv))
            for chunk in _chunks(_lines(args.input), args.chunk_size):
                vectors = hub.embed(chunk, pooling=args.pooling, batch_size=args.batch_size, normalize=args.normalize,
                                    show_progress=False, head=args.head, precision=args.precision,
                                    truncate_dim=args.truncate_dim)
                truncated += hub.num_truncated
                empty += sum(1 for s in chunk if not s.strip())
                if args.quantize:
                    if args.quantize in SCALAR and ranges is None:  # the first chunk calibrates
                        ranges = calibration_ranges(vectors, f"the first --chunk-size ({args.chunk_size}) vectors")
                    vectors = quantize(vectors, args.quantize, ranges)
                writer.write(vectors)
                if tsv_file:
                    np.savetxt(tsv_file, vectors, delimiter="\t", fmt="%d" if args.quantize else "%.6g")
                progress.update(len(chunk))
        except UnicodeDecodeError as e:
            writer.abort()
            fail(f"--input (standard input): {e}" if args.input == "-" else f"--input {NotUtf8Error(args.input, e)}")
        except QuantizationError as e:
            writer.abort()
            fail(f"--quantize {args.quantize}: {e}; pass --quantize-ranges, or a larger --chunk-size")
        except BaseException:
            writer.abort()
            raise
        progress.close()
        if ranges_out and ranges is not None:  # before the vectors: they are useless without it
            with atomic_write(ranges_out, "wb") as f:
                np.save(f, ranges)
        writer.close()
    seconds = time.time() - start
    logger.info("%d sentences from %s (%d empty, embedded as <s></s>)", writer.rows, args.input, empty)
    logger.info(
        "embedded %d sentences in %.1f s (%.0f sentences/s; %s pooling, head %s, %s; %d truncated to %d positions)",
        writer.rows, seconds, writer.rows / max(seconds, 1e-9), args.pooling or hub.default_pooling, args.head,
        args.precision, truncated, hub.max_length,
    )
    logger.info("wrote %s (%d, %d)", output, writer.rows, writer.dim)
    if ranges_out and ranges is not None:
        logger.info("wrote %s: the %s ranges (pass it as --quantize-ranges to quantize queries alike)",
                    ranges_out, args.quantize)
    if tsv:
        logger.info("wrote %s", tsv)


if __name__ == "__main__":
    main()
