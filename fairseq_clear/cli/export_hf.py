"""``clear-export-hf``: a trained encoder → a Hugging Face XLM-R model that sentence-transformers loads.

    clear-export-hf --checkpoint checkpoints/checkpoint_best.pt --data data-bin --out clear-st

The conversion lives in :mod:`fairseq_clear.export.hf`; this is its console script.
The output directory must be new or empty; ``--overwrite`` replaces only the
files an earlier export wrote there (its manifest), never anything else.
"""

import argparse
import os

from ..export.hf import CHECK_SENTENCES, ExportError, export
from ..export.model_card import read_sts_table
from ..export.onnx import check_available as check_onnx_available
from ..export.output_dir import OutputDirError, check_output_dir
from .hub_args import add_checkpoint_args, fail, load_hub, setup_logging
from . import command, positive_float


def get_parser():
    from ..models.pooling import HEAD_CHOICES
    from ..models.pooling import POOLING_CHOICES

    parser = argparse.ArgumentParser(
        prog="clear-export-hf",
        description="Export a trained encoder as a Hugging Face XLM-R model + sentencepiece "
        "tokenizer, packaged as a sentence-transformers model; verified against the hub.",
    )
    add_checkpoint_args(parser)
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory: new or empty, unless --overwrite")
    parser.add_argument(
        "--overwrite", action="store_true",
        help="export into a non-empty --out: replaces the files a previous export wrote there "
        "(listed in its fairseq_clear_export.json) and leaves every other file alone",
    )
    parser.add_argument("--pooling", choices=POOLING_CHOICES, help="pooling of the sentence-transformers model (default: the model's --sentence-pooling)")
    parser.add_argument(
        "--head", choices=HEAD_CHOICES, default="representation",
        help="representation: pooled output, through CLSR's e if present; pooled: encoder only; "
        "projection: through the contrastive projection head g too (default: representation)",
    )
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                        help="add a Normalize module (unit-length vectors) (default: the model's own: yes "
                        "when it was imported from a sentence-transformers model with one)")
    parser.add_argument(
        "--with-lm-head", action="store_true",
        help="save XLMRobertaForMaskedLM (encoder + masked-LM head, for fill-mask) instead of the "
        "encoder alone; sentence-transformers then notes the unused head when loading",
    )
    parser.add_argument(
        "--sts-results", metavar="FILE",
        help="clear-eval-sts --json output for this checkpoint: its table (for the export's pooling) "
        "goes into the model card")
    parser.add_argument(
        "--onnx", action="store_true",
        help="also write sentence-transformers' ONNX layout: onnx/model.onnx (fp32; outputs last_hidden_state and "
        "sentence_embedding) and onnx/model_qint8_avx512_vnni.onnx (onnxruntime's dynamic int8), the fp32 one "
        "checked against the hub too; needs the onnx extra (pip install 'fairseq-clear[onnx]')")
    parser.add_argument("--check-sentences", metavar="FILE", help="sentences (one per line) for the verification (default: a built-in few)")
    parser.add_argument("--tolerance", type=positive_float, default=1e-4,
                        help="largest allowed |difference| to the hub's embed(), finite and > 0 (default: 1e-4)")
    return parser


@command
def main(argv=None):
    setup_logging()
    args = get_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every file is local; no hub look-ups
    args.cpu = True  # export and verify in fp32 on CPU
    try:
        check_output_dir(args.out, overwrite=args.overwrite)  # before any work
        if args.onnx:
            check_onnx_available()
    except (OutputDirError, ExportError) as e:
        fail(e)
    sts_table = None
    if args.sts_results:
        try:
            sts_table = read_sts_table(args.sts_results, args.pooling)
        except ExportError as e:
            fail(e)
    hub = load_hub(args)
    sentences = CHECK_SENTENCES
    if args.check_sentences:
        with open(args.check_sentences, encoding="utf-8") as f:
            sentences = [line.rstrip("\n") for line in f]
    try:
        export(hub, args.out, args.pooling, args.head, args.normalize, args.with_lm_head,
               overwrite=args.overwrite, check_sentences=sentences, tolerance=args.tolerance, sts_table=sts_table,
               onnx=args.onnx)
    except (ExportError, OutputDirError) as e:
        fail(e)
    print(f"exported to {args.out}; SentenceTransformer('{args.out}').encode() matches the hub "
          f"within {args.tolerance:g} on {len(sentences)} sentences"
          + ("; so does onnx/model.onnx's sentence_embedding under onnxruntime" if args.onnx else ""))


if __name__ == "__main__":
    main()
