"""``clear-prepare RAW... OUT_DIR``: raw text -> a binarized data directory for ``--task clear``.

The steps live in :mod:`fairseq_clear.preprocessing.pipeline`; this is its console script.
"""

import argparse
import logging
import sys
from typing import Optional, Sequence

from ..preprocessing.pipeline import add_args, format_summary, prepare
from . import command


@command
def main(argv: Optional[Sequence[str]] = None):
    parser = argparse.ArgumentParser(
        prog="clear-prepare",
        usage="%(prog)s RAW... OUT_DIR [options]",
        description="Raw text → sentences → sentencepiece → fairseq's .bin/.idx (what fairseq-preprocess "
        "writes): a data directory for fairseq-train --user-dir $(clear-user-dir) --task clear; or the vocabulary "
        "once (--only-vocab) and shards of a large corpus on many machines (--shards). Resumable: re-running "
        "skips the steps whose outputs are complete. See docs/data.md.",
    )
    add_args(parser)
    args = parser.parse_intermixed_args(argv)  # OUT_DIR after the options too
    if len(args.paths) < 2:
        parser.error("need at least one RAW input and the OUT_DIR")
    *inputs, out_dir = args.paths
    options = {k: v for k, v in vars(args).items() if k != "paths"}
    logging.basicConfig(
        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        level=logging.INFO,
        stream=sys.stderr,
        force=True,
    )
    print(format_summary(prepare(inputs, out_dir, **options)))


if __name__ == "__main__":
    main()
