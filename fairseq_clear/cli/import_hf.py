"""``clear-import-hf MODEL_DIR OUT_DIR``: a Hugging Face BERT / RoBERTa / XLM-R directory → fairseq RoBERTa.

The conversion lives in :mod:`fairseq_clear.export.from_hf`; this is its console script.
"""

import argparse
import os

from ..export.from_hf import ImportHfError, import_hf
from ..export.output_dir import OutputDirError
from .hub_args import fail, setup_logging
from . import command, positive_float


def get_parser():
    p = argparse.ArgumentParser(
        prog="clear-import-hf",
        description="Import a local Hugging Face BERT / RoBERTa / XLM-R model directory as a fairseq "
        "RoBERTa directory (model.pt, dict.txt, tokenizer) for fairseq-train --restore-file, the hub "
        "and every clear-* tool. Nothing is downloaded.",
    )
    p.add_argument("model_dir", help="Hugging Face model directory (config.json, weights, tokenizer files)")
    p.add_argument("out_dir", help="output directory: new or empty, unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files a previous import wrote into out_dir (and nothing else)")
    p.add_argument("--tolerance", type=positive_float, default=1e-4,
                   help="largest allowed difference to transformers' last hidden states and to "
                   "sentence-transformers' encode() of MODEL_DIR (default: 1e-4)")
    return p


@command
def main(argv=None):
    setup_logging()
    args = get_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every file is local
    from ..vocabulary import TokenizerError

    try:
        summary = import_hf(args.model_dir, args.out_dir, overwrite=args.overwrite, tolerance=args.tolerance)
    except (ImportHfError, OutputDirError, TokenizerError) as e:
        fail(e)
    checked = ("not verified (transformers is not installed)" if summary["max_difference"] is None
               else f"within {summary['max_difference']:.1e} of transformers' last hidden states and "
               "sentence-transformers' encode()")
    print(f"imported {summary['model_type']} ({summary['tokenizer']} tokenizer, {summary['rows']} dictionary "
          f"rows, LM head: {'yes' if summary['lm_head'] else 'fresh'}) to {args.out_dir}; {checked}")
    from ..export.from_hf import describe

    print(f"the model: {describe(summary['options'])}")
    with open(os.path.join(args.out_dir, "fairseq_args.txt"), encoding="utf-8") as f:
        print("fairseq-train options for this encoder: " + f.read().strip())


if __name__ == "__main__":
    main()
