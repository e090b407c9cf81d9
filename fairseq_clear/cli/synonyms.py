"""``clear-synonyms``: build synonym tables for ``--augmentations subs`` and measure their coverage.

The tables live in :mod:`fairseq_clear.preprocessing.synonym_tables`; this is its console script.
"""

import argparse
import json
import logging
import os
import sys
from typing import Optional, Sequence

from ..preprocessing.common import PrepareError
from ..preprocessing.synonym_tables import (
    build_wordnet_table,
    convert_counterfitted,
    coverage,
    parse_pos,
)
from . import command


def _print(obj):
    print(json.dumps(obj, indent=2, ensure_ascii=False))


@command
def main(argv: Optional[Sequence[str]] = None):
    parser = argparse.ArgumentParser(
        prog="clear-synonyms",
        description="Build synonym tables (JSON word -> [synonyms]) for --augmentations subs, "
        "and measure their coverage on a binarized corpus.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def coverage_args(p):
        p.add_argument("--coverage-data", metavar="DATA_BIN", default="",
                       help="also report the coverage on this clear-prepare data directory")
        p.add_argument("--coverage-split", default="valid",
                       help="split of --coverage-data to measure (default: %(default)s)")

    p = sub.add_parser("counterfitted", help="convert the counter-fitted neighbour list "
                       "(Jia et al. 2019; the CLEAR paper's source)")
    p.add_argument("input", help="counterfitted_neighbors.json (word -> [neighbours])")
    p.add_argument("output", help="table to write (JSON word -> [synonyms])")
    coverage_args(p)

    p = sub.add_parser("wordnet", help="build a table from WordNet (nltk; needs NLTK_DATA with "
                       "corpora/wordnet, see `make wordnet`)")
    p.add_argument("output", help="table to write (JSON word -> [synonyms])")
    p.add_argument("--pos", default="n,v,a,r",
                   help="parts of speech to take synsets from, comma-separated: n (noun), "
                   "v (verb), a (adjective, satellites included), r (adverb) (default: %(default)s)")
    p.add_argument("--max-synonyms", type=int, default=0,
                   help="keep at most this many synonyms per word, from its most frequent "
                   "senses first (WordNet's sense order); 0 = all (default: %(default)s)")
    p.add_argument("--keep-capitalized", action="store_true",
                   help="keep lemma names with capitals (proper nouns, abbreviations such as "
                   "'A' = adenine, which would replace the article 'A'); left out by default")
    coverage_args(p)

    p = sub.add_parser("coverage", help="share of a corpus's words that have a synonym, as the "
                       "subs augmentation sees them")
    p.add_argument("table", help="synonym table (JSON word -> [synonyms])")
    p.add_argument("--data", required=True, metavar="DATA_BIN",
                   help="a clear-prepare data directory (dict.txt, sentencepiece.model, splits)")
    p.add_argument("--split", default="valid", help="split to measure (default: %(default)s)")
    p.add_argument("--max-sentences", type=int, default=0,
                   help="measure on the first this many sentences; 0 = all (default: %(default)s)")

    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.INFO, stream=sys.stderr, force=True)
    try:
        if args.command == "coverage":
            _print(coverage(args.table, args.data, args.split, args.max_sentences))
            return
        if args.command == "counterfitted":
            stats = convert_counterfitted(args.input, args.output)
        else:
            if args.max_synonyms < 0:
                raise PrepareError(f"--max-synonyms must be >= 0, got {args.max_synonyms}")
            stats = build_wordnet_table(args.output, parse_pos(args.pos), args.max_synonyms,
                                        args.keep_capitalized)
        result = {"output": os.path.abspath(args.output), "table": stats}
        if args.coverage_data:
            result["coverage"] = coverage(args.output, args.coverage_data, args.coverage_split)
        _print(result)
    except PrepareError as e:
        print(f"clear-synonyms: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
