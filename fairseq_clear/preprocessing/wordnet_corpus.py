"""The demo corpus: WordNet's glosses and usage examples as short English sentences.

Every synset is one document: its gloss, then its usage examples, one sentence
per line, a blank line between documents. WordNet 3.0 gives 117,659 glosses and
48,339 examples, about 166k sentences in 117,659 documents (most documents are a
single sentence, so the DeCLUTR-style span objective finds few multi-sentence
documents here). The file is in ``--input-format lines`` form::

    clear-prepare wordnet.txt OUT --input-format lines --vocab-size 8000

Glosses and examples are written as WordNet has them (lower-case glosses without
a final period); only whitespace is normalised.
"""

import os
from typing import Dict, Optional, Sequence

from ..atomic_files import atomic_write
from .common import PrepareError, check_output_dir

#: clear-prepare options that read the file this module writes
PREPARE_ARGS = ["--input-format", "lines", "--documents", "blank-lines"]


def _clean(text: str) -> str:
    return " ".join(text.split())


def build_wordnet_corpus(out_path: str, pos: Optional[Sequence[str]] = None,
                         examples: bool = True) -> Dict:
    """Write the WordNet gloss corpus to ``out_path`` (atomically); returns its statistics.

    Args:
        out_path: the text file to write.
        pos: parts of speech to include (``n``, ``v``, ``a``, ``r``; default all).
        examples: include the usage examples after each gloss.
    """
    from .synonym_tables import load_wordnet

    wn = load_wordnet()
    check_output_dir(os.path.dirname(os.path.abspath(out_path)), "out_path")
    stats = {"documents": 0, "sentences": 0, "glosses": 0, "examples": 0,
             "empty_glosses_skipped": 0, "empty_examples_skipped": 0}
    with atomic_write(out_path) as f:
        for p in (pos or ["n", "v", "a", "r"]):
            for synset in wn.all_synsets(p):
                sentences = []
                gloss = _clean(synset.definition() or "")
                if gloss:
                    sentences.append(gloss)
                    stats["glosses"] += 1
                else:
                    stats["empty_glosses_skipped"] += 1
                if examples:
                    for ex in synset.examples():
                        ex = _clean(ex)
                        if ex:
                            sentences.append(ex)
                            stats["examples"] += 1
                        else:
                            stats["empty_examples_skipped"] += 1
                if not sentences:
                    continue
                if stats["documents"]:
                    f.write("\n")
                f.write("\n".join(sentences) + "\n")
                stats["documents"] += 1
                stats["sentences"] += len(sentences)
    if not stats["sentences"]:
        raise PrepareError(f"WordNet gave no sentences for --pos {pos}")
    stats.update(path=os.path.abspath(out_path), bytes=os.path.getsize(out_path),
                 wordnet=str(wn.get_version()), prepare_args=PREPARE_ARGS)
    return stats
