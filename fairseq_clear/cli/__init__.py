"""The console scripts: a thin ``main`` each, over library code (the library never imports cli).

Every ``main`` is wrapped by :func:`command`: an error the package raises for a user's option,
input or file (a :class:`~fairseq_clear.errors.FairseqClearError`) ends the command with one
``error:`` line on stderr and exit status 2, not a traceback; so does a full disk.
"""

import errno
import functools
import sys

from ..errors import FairseqClearError


def command(main):
    """``main(argv=None)`` with the package's errors turned into one ``error:`` line (status 2)."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except FairseqClearError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        except OSError as e:  # a full disk where no caller named the file: still one line
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            where = f"writing '{e.filename}'" if e.filename else "writing an output"
            print(f"error: no space left on device {where} ({e.strerror}); free some space and run it again",
                  file=sys.stderr)
            sys.exit(2)

    return wrapper


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (``nan`` and ``inf`` would make any check pass)."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be finite and > 0")
    return value


def whole_number(minimum: int):
    """argparse type: a whole number >= ``minimum`` (``--workers`` 1, ``--limit-train`` 0)."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be >= {minimum}")
        return value

    parse.__name__ = f"whole number >= {minimum}"
    return parse
