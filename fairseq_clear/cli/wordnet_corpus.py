"""``python -m fairseq_clear.cli.wordnet_corpus OUT``: WordNet's glosses and examples as a demo corpus.

The corpus builder lives in :mod:`fairseq_clear.preprocessing.wordnet_corpus`.
"""

import argparse
import json
import sys
from typing import Optional, Sequence

from ..preprocessing.common import PrepareError
from ..preprocessing.synonym_tables import parse_pos
from ..preprocessing.wordnet_corpus import PREPARE_ARGS, build_wordnet_corpus
from . import command


@command
def main(argv: Optional[Sequence[str]] = None):
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_clear.cli.wordnet_corpus",
        description="Write WordNet's glosses and examples as a small demo corpus (one synset "
        "per document, one sentence per line); prepare it with clear-prepare "
        + " ".join(PREPARE_ARGS),
    )
    parser.add_argument("output", help="text file to write")
    parser.add_argument("--pos", default="n,v,a,r",
                        help="parts of speech, comma-separated subset of n,v,a,r (default: %(default)s)")
    parser.add_argument("--no-examples", dest="examples", action="store_false",
                        help="glosses only, without the usage examples")
    args = parser.parse_args(argv)
    try:
        stats = build_wordnet_corpus(args.output, parse_pos(args.pos), args.examples)
    except PrepareError as e:
        print(f"wordnet_corpus: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
