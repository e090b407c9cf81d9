"""Command-line options shared by the scripts that load a trained checkpoint through the hub."""

import argparse
import logging
import os
import sys

from ..models.pooling import HEAD_CHOICES
from ..models.pooling import POOLING_CHOICES


def add_checkpoint_args(parser: argparse.ArgumentParser, required: bool = True):
    group = parser.add_argument_group("checkpoint")
    group.add_argument(
        "--checkpoint", required=required, metavar="FILE",
        help="a checkpoint written by fairseq-train (e.g. checkpoints/checkpoint_best.pt)",
    )
    group.add_argument(
        "--data", metavar="DIR",
        help="the binarized data directory the model was trained on, or a model directory "
        "(clear-import-hf's output, fairseq's roberta.base): its dict.txt and tokenizer files "
        "define the vocabulary (default: the checkpoint's directory)",
    )
    group.add_argument(
        "--bpe", choices=("sentencepiece", "gpt2", "bert"),
        help="the tokenizer that produced dict.txt, as fairseq's --bpe (default: found in DATA: its "
        "clear_tokenizer.json, sentencepiece.model, encoder.json + vocab.bpe, or vocab.txt)",
    )
    group.add_argument(
        "--sentencepiece-model", metavar="FILE",
        help="the sentencepiece model that produced dict.txt (default: DATA/sentencepiece.model)",
    )
    group.add_argument("--cpu", action="store_true", help="run on CPU even if a GPU is available")
    group.add_argument(
        "--allow-nonfinite-weights", action="store_true",
        help="load a checkpoint whose weights hold NaN or Inf (refused by default: every vector would "
        "be NaN); for debugging a diverged run",
    )
    return group


def add_embedding_args(parser: argparse.ArgumentParser, pooling_help: str, multiple_poolings: bool = False):
    group = parser.add_argument_group("embedding")
    if multiple_poolings:
        group.add_argument(
            "--poolings", default="cls,mean",
            help=pooling_help + f" (comma-separated, from {', '.join(POOLING_CHOICES)})",
        )
    else:
        group.add_argument("--pooling", choices=POOLING_CHOICES, help=pooling_help)
    group.add_argument(
        "--head", choices=HEAD_CHOICES, default="representation",
        help="representation: the pooled encoder output, through CLSR's sentence encoder e "
        "when the model has one (what the papers evaluate); pooled: the encoder output "
        "only; projection: through the contrastive projection head g (default: representation)",
    )
    group.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default: 64)")
    return group


def load_hub(args):
    """The hub for ``--checkpoint``/``--data``, on GPU unless ``--cpu`` (errors exit with the message)."""
    import torch

    from ..errors import FairseqClearError
    from ..models.hub_interface import from_pretrained

    path = os.path.abspath(os.path.expanduser(args.checkpoint))
    if os.path.isdir(path):  # the hub would look for a file of that name beside it
        found = sorted(f for f in os.listdir(path) if f.endswith(".pt"))
        fail(f"--checkpoint '{args.checkpoint}' is a directory; give a checkpoint file in it: "
             + (", ".join(os.path.join(args.checkpoint, f) for f in found) if found
                else "it holds no .pt file (fairseq-train writes checkpoint_best.pt and checkpoint_last.pt)"))
    # a path the user typed means what it means in their shell: ./x and ../x from the current directory
    data = os.path.abspath(os.path.expanduser(args.data)) if args.data else os.path.dirname(path)
    try:
        hub = from_pretrained(
            os.path.dirname(path),
            os.path.basename(path),
            data,
            data_option=f"--data {args.data}" if args.data else "--data (not given: the checkpoint's directory)",
            bpe=getattr(args, "bpe", None),
            sentencepiece_model=args.sentencepiece_model,
            allow_nonfinite_weights=getattr(args, "allow_nonfinite_weights", False),
        )
    except FairseqClearError as e:
        fail(e)
    if not args.cpu and torch.cuda.is_available():
        hub.cuda()
    return hub


def fail(error) -> None:
    """Exit with status 2 and one ``error: ...`` line: a refused or unreadable input is not a crash."""
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)


def setup_logging():
    logging.basicConfig(
        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        level=os.environ.get("LOGLEVEL", "INFO").upper(),
        stream=sys.stderr,
        force=True,  # a library may have configured the root logger on import already
    )
