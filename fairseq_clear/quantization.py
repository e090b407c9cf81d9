"""Quantized sentence vectors, as sentence-transformers' ``quantize_embeddings`` computes them.

    codes = quantize(vectors, "int8", ranges=calibration_ranges(corpus_vectors))

* ``int8`` / ``uint8``: each dimension cut into 256 buckets between its minimum and maximum over a
  calibration set (``ranges``, shape (2, dim): the corpus's, so that queries and every later batch
  use the same buckets); values outside are clipped. ``int8`` is ``uint8`` minus 128.
* ``binary`` / ``ubinary``: the sign bit of each dimension, packed 8 to a byte (``binary``: the
  bytes minus 128, as int8).

The same arithmetic as sentence-transformers (float32 ranges, ``floor``), so the codes are equal;
:func:`dequantize` maps codes back to the middle of their bucket, which rescoring a search needs
(scoring the raw codes loses each dimension's scale: sentence-transformers PR #4058).
"""

import numpy as np

from .errors import FairseqClearError

#: what ``quantize`` accepts; "float32" leaves the vectors as they are
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
SCALAR = ("int8", "uint8")
BINARY = ("binary", "ubinary")


class QuantizationError(FairseqClearError, ValueError):
    """A precision, ranges or vectors that cannot be quantized; the message names the argument."""


def check_precision(precision, name: str = "quantize") -> str:
    if precision not in PRECISIONS:
        raise QuantizationError(f"{name} must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def _floats(embeddings, name: str) -> np.ndarray:
    if hasattr(embeddings, "detach"):  # a torch tensor
        embeddings = embeddings.detach().float().cpu().numpy()
    a = np.asarray(embeddings)
    if a.dtype.kind != "f":
        raise QuantizationError(f"{name} must be float vectors, got dtype {a.dtype} (already quantized?)")
    if a.ndim != 2:
        raise QuantizationError(f"{name} must be a 2-D (rows x dim) array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise QuantizationError(f"{name} hold NaN or Inf; they cannot be quantized")
    return a


def calibration_ranges(embeddings, name: str = "calibration embeddings") -> np.ndarray:
    """(2, dim) float32: each dimension's minimum and maximum over ``embeddings`` (at least 2 rows)."""
    a = _floats(embeddings, name)
    if len(a) < 2:
        raise QuantizationError(f"{name}: int8/uint8 ranges need at least 2 vectors to calibrate on, got {len(a)}; "
                                "give ranges from a corpus")
    return np.vstack((a.min(axis=0), a.max(axis=0))).astype(np.float32)


def check_ranges(ranges, dim: int, name: str = "ranges") -> np.ndarray:
    r = np.asarray(ranges, dtype=np.float32)
    if r.shape != (2, dim) or not np.isfinite(r).all() or (r[1] < r[0]).any():
        raise QuantizationError(f"{name} must be a finite (2, {dim}) array of per-dimension minima and maxima "
                                f"(minimum <= maximum), got shape {r.shape}")
    return r


def _steps(ranges):
    steps = (ranges[1] - ranges[0]) / 255
    return np.where(steps == 0, 1, steps)  # a constant dimension: one bucket


def quantize(embeddings, precision: str, ranges=None) -> np.ndarray:
    """``embeddings`` (rows x dim, float) at ``precision``; int8/uint8 need ``ranges`` (see
    :func:`calibration_ranges`: without them the embeddings calibrate themselves)."""
    check_precision(precision, "precision")
    a = _floats(embeddings, "embeddings")
    if precision == "float32":
        return a.astype(np.float32)
    if precision in BINARY:
        bits = np.packbits(a > 0, axis=-1)
        return (bits - 128).astype(np.int8) if precision == "binary" else bits
    ranges = check_ranges(calibration_ranges(a, "embeddings") if ranges is None else ranges, a.shape[1])
    codes = np.clip(np.floor((a - ranges[0]) / _steps(ranges)), 0, 255)
    return (codes - 128).astype(np.int8) if precision == "int8" else codes.astype(np.uint8)


def dequantize(codes, precision: str, ranges=None, dim: int = None) -> np.ndarray:
    """float32 vectors that ``codes`` stand for: int8/uint8 at the middle of their bucket (``ranges``:
    those they were quantized with), binary/ubinary as 0/1 bits (``dim``: the unpacked size)."""
    codes = np.asarray(codes)
    if precision in BINARY:
        bits = codes.view(np.uint8) ^ np.uint8(0x80) if precision == "binary" else codes
        return np.unpackbits(bits, axis=-1)[..., :dim].astype(np.float32)
    ranges = check_ranges(ranges, codes.shape[-1])
    level = codes.astype(np.float32) + (128.5 if precision == "int8" else 0.5)
    return level * _steps(ranges) + ranges[0]
