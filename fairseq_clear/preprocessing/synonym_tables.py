"""``clear-synonyms``: synonym tables for the ``subs`` augmentation, and their coverage.

The one format the task reads (``--synonym-table``): a JSON object
``{"word": ["synonym", ...]}``. Two sources:

* ``clear-synonyms counterfitted IN.json OUT.json``: the counter-fitted
  word-vector neighbours of Jia et al. (2019), the list the CLEAR paper used;
* ``clear-synonyms wordnet OUT.json``: WordNet through nltk: the lemma names of
  the synsets a word is a lemma of (lower-case lemmas only, unless
  ``--keep-capitalized``).

Both drop words without a synonym, multiword entries (a space or ``_``) and the
word itself among its synonyms, and count what they drop.

``clear-synonyms coverage TABLE --data DATA_BIN`` reports the share of words of
a binarized split that have at least one synonym, measured with the same
:func:`fairseq_clear.synonyms.build_synonym_index` the task builds, so it is
exactly the share of words ``subs`` can change (the paper: about 40%).
"""

import collections
import json
import logging
import os
from typing import Dict, Iterable, List, Sequence, Tuple

from ..vocabulary import APPENDED_SYMBOLS
from ..atomic_files import atomic_write
from .common import PrepareError, check_output_dir

logger = logging.getLogger(__name__)

WORDNET_POS = {"n": "noun", "v": "verb", "a": "adjective (with satellites)", "r": "adverb"}


def _multiword(w: str) -> bool:
    return (" " in w) or ("_" in w) or not w


def clean_table(raw: Dict[str, Iterable[str]]) -> Tuple[Dict[str, List[str]], Dict[str, int]]:
    """Drop multiword keys and synonyms, the key among its synonyms, duplicates and empty lists."""
    stats = collections.Counter()
    table = {}
    for word, syns in raw.items():
        stats["words_in"] += 1
        if _multiword(word):
            stats["multiword_words_dropped"] += 1
            continue
        kept, seen = [], {word.lower()}
        for s in syns:
            stats["synonyms_in"] += 1
            if _multiword(s):
                stats["multiword_synonyms_dropped"] += 1
            elif s.lower() == word.lower():
                stats["self_synonyms_dropped"] += 1
            elif s.lower() in seen:
                stats["duplicate_synonyms_dropped"] += 1
            else:
                seen.add(s.lower())
                kept.append(s)
        if not kept:
            stats["words_without_synonyms_dropped"] += 1
            continue
        table[word] = kept
    stats["words"] = len(table)
    stats["synonyms"] = sum(len(v) for v in table.values())
    return table, dict(stats)


def write_table(table: Dict[str, List[str]], out_path: str):
    out_dir = os.path.dirname(os.path.abspath(out_path))
    check_output_dir(out_dir, "OUT")
    with atomic_write(out_path) as f:
        json.dump(table, f, ensure_ascii=False, indent=0, sort_keys=True)
        f.write("\n")


def convert_counterfitted(in_path: str, out_path: str) -> Dict[str, int]:
    """The counter-fitted neighbour list (JSON word → [neighbours]) in the task's format."""
    if not os.path.isfile(in_path):
        raise PrepareError(f"counter-fitted list '{in_path}' does not exist")
    try:
        with open(in_path, encoding="utf-8") as f:
            raw = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PrepareError(f"'{in_path}' is not valid JSON ({e})") from None
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise PrepareError(f"'{in_path}' must hold a JSON object word -> [neighbours]")
    table, stats = clean_table(raw)
    write_table(table, out_path)
    return dict(stats, source=os.path.abspath(in_path))


def parse_pos(spec: str) -> List[str]:
    pos = [p.strip() for p in spec.split(",") if p.strip()]
    bad = [p for p in pos if p not in WORDNET_POS]
    if not pos or bad:
        raise PrepareError(
            f"--pos: '{spec}' must be a comma-separated subset of "
            + ", ".join(f"{k} ({v})" for k, v in WORDNET_POS.items())
        )
    return pos


def load_wordnet():
    """nltk's WordNet reader, with an error that says how to install it offline."""
    from nltk.corpus import wordnet as wn

    try:
        wn.ensure_loaded()
    except LookupError:
        raise PrepareError(
            "WordNet for nltk is not installed: run `make wordnet` (scripts/install_wordnet.sh, "
            "from Debian packages) and set NLTK_DATA=<repo>/nltk_data"
        ) from None
    return wn


def wordnet_table(pos: Sequence[str] = ("n", "v", "a", "r"), max_synonyms: int = 0,
                  keep_capitalized: bool = False) -> Tuple[Dict[str, List[str]], Dict]:
    """word → one-word lemma names of the synsets the word is a lemma of (``pos`` only).

    Synonyms are in WordNet's file order (part of speech, then synset); with
    ``max_synonyms`` > 0 they are sorted by the word's sense order (most frequent
    sense first) and the first that many kept. Unless ``keep_capitalized``, lemma names with an
    upper-case letter are left out: they are proper nouns and abbreviations, and a
    key such as "A" (adenine, ampere) would replace the sentence-initial article
    (``subs`` handles sentence-initial capitals itself).
    """
    wn = load_wordnet()
    raw: Dict[str, List[str]] = collections.defaultdict(list)
    synsets = 0
    capitalized = collections.Counter()
    for p in pos:
        for synset in wn.all_synsets(p):
            synsets += 1
            names = synset.lemma_names()
            if not keep_capitalized:
                cased = [n for n in names if n != n.lower()]
                if cased:
                    capitalized["words"] += len(cased)
                    names = [n for n in names if n == n.lower()]
            for word in names:
                raw[word].extend(n for n in names if n != word)
    # words that are lemmas but have no other lemma in any synset stay in raw with [],
    # so that clean_table counts them
    table, stats = clean_table(raw)
    stats["capitalized_lemmas_dropped"] = capitalized["words"]
    if max_synonyms > 0:
        # keep the synonyms from the word's most frequent senses: WordNet's sense order
        for word, syns in table.items():
            rank = {}
            for p in pos:
                for synset in wn.synsets(word, pos=p):
                    for name in synset.lemma_names():
                        rank.setdefault(name, len(rank))
            syns.sort(key=lambda n: rank.get(n, len(rank)))
        cut = sum(max(0, len(v) - max_synonyms) for v in table.values())
        table = {w: v[:max_synonyms] for w, v in table.items()}
        stats["synonyms_beyond_max_dropped"] = cut
        stats["synonyms"] = sum(len(v) for v in table.values())
    stats.update(source="WordNet " + str(wn.get_version()), pos=",".join(pos), synsets=synsets)
    return table, stats


def build_wordnet_table(out_path: str, pos: Sequence[str] = ("n", "v", "a", "r"),
                        max_synonyms: int = 0, keep_capitalized: bool = False) -> Dict:
    """Write the WordNet table (see :func:`wordnet_table`) to ``out_path``; returns its statistics."""
    table, stats = wordnet_table(pos, max_synonyms, keep_capitalized)
    write_table(table, out_path)
    return stats


# ---- coverage ------------------------------------------------------------------------

def load_task_dictionary(data_dir: str):
    """The dictionary exactly as ``--task clear`` builds it (dict.txt, then <mask>, [DEL])."""
    from ..data.binarized_checks import load_dictionary

    path = os.path.join(data_dir, "dict.txt")
    if not os.path.isfile(path):
        raise PrepareError(f"--data: '{data_dir}' has no dict.txt (run clear-prepare)")
    d = load_dictionary(path)
    for symbol in APPENDED_SYMBOLS:
        d.add_symbol(symbol)
    return d


def coverage(table_path: str, data_dir: str, split: str = "valid",
             max_sentences: int = 0, sentencepiece_model: str = "") -> Dict:
    """Share of the words of ``data_dir/split`` that have at least one synonym in the table,
    as the ``subs`` augmentation sees them (token-id words, capitalised variants included)."""
    from ..data.binarized_checks import load_checked
    from ..synonyms import build_synonym_index, load_synonym_table, synonym_coverage

    dictionary = load_task_dictionary(data_dir)
    spm_model = sentencepiece_model or os.path.join(data_dir, "sentencepiece.model")
    index = build_synonym_index(load_synonym_table(table_path), dictionary, spm_model)
    prefix = os.path.join(data_dir, split)
    ds = load_checked(prefix, dictionary)
    if ds is None:
        raise PrepareError(f"--split: no {prefix}.bin/.idx in '{data_dir}'")

    def bodies():
        n = 0
        for i in range(len(ds)):
            item = ds[i]
            if len(item) <= 1:
                continue  # a document break
            yield item[:-1].numpy()
            n += 1
            if max_sentences and n >= max_sentences:
                return

    covered, words = synonym_coverage(index, bodies())
    return {
        "table": os.path.abspath(table_path),
        "data": os.path.abspath(data_dir),
        "split": split,
        "words": words,
        "words_with_synonym": covered,
        "coverage": round(covered / words, 4) if words else 0.0,
        "index_word_forms": len(index),
    }
