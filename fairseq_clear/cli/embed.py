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
import time

import numpy as np

from .hub_args import add_checkpoint_args, add_embedding_args, load_hub, setup_logging

logger = logging.getLogger("clear-embed")


def get_parser():
    parser = argparse.ArgumentParser(
        prog="clear-embed",
        description="Embed a file of sentences (one per line) with a trained checkpoint; "
        "writes a float32 .npy matrix, row i = line i.",
    )
    add_checkpoint_args(parser)
    add_embedding_args(parser, "cls ([CLS], the paper) or mean (default: the model's --sentence-pooling)")
    io = parser.add_argument_group("input and output")
    io.add_argument("--input", required=True, metavar="FILE", help="UTF-8 text, one sentence per line ('-' = stdin)")
    io.add_argument("--output", required=True, metavar="FILE", help="the .npy file to write (N x dim, float32)")
    io.add_argument("--tsv", metavar="FILE", help="also write the vectors as tab-separated text, one per line")
    io.add_argument("--normalize", action="store_true", help="scale every vector to unit length")
    return parser


def read_sentences(path: str):
    # only '\n' ends a line, as for wc -l and the row count: not splitlines() (U+2028,
    # U+0085, ...), and newline="\n" so that a lone '\r' inside a line does not either
    if path == "-":
        buffer = getattr(sys.stdin, "buffer", None)  # a StringIO in tests has none
        stdin = sys.stdin if buffer is None else io.TextIOWrapper(buffer, encoding="utf-8", newline="\n")
        return [line.rstrip("\n").rstrip("\r") for line in stdin]
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--input '{path}' does not exist")
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n").rstrip("\r") for line in f]


def main(argv=None):
    setup_logging()
    args = get_parser().parse_args(argv)
    try:
        sentences = read_sentences(args.input)
    except (FileNotFoundError, UnicodeDecodeError) as e:
        sys.exit(f"error: --input: {e}")
    hub = load_hub(args)
    empty = sum(1 for s in sentences if not s.strip())
    logger.info("%d sentences from %s (%d empty, embedded as <s></s>)", len(sentences), args.input, empty)
    start = time.time()
    vectors = hub.embed(
        sentences, pooling=args.pooling, batch_size=args.batch_size, normalize=args.normalize,
        show_progress=sys.stderr.isatty(), head=args.head,
    )
    seconds = time.time() - start
    logger.info(
        "embedded %d sentences in %.1f s (%s pooling, head %s; %d truncated to %d positions)",
        len(sentences), seconds, args.pooling or hub.default_pooling, args.head,
        hub.num_truncated, hub.model.max_positions(),
    )
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    np.save(args.output, vectors.astype(np.float32))
    logger.info("wrote %s %s", args.output, vectors.shape)
    if args.tsv:
        np.savetxt(args.tsv, vectors, delimiter="\t", fmt="%.6g", encoding="utf-8")
        logger.info("wrote %s", args.tsv)


if __name__ == "__main__":
    main()
