"""Synonym tables for the ``subs`` augmentation.

The table format read everywhere is a JSON object ``{"word": ["synonym", ...]}``
(the format of the counter-fitted neighbour list of Jia et al. 2019 that the
CLEAR paper used). :func:`build_synonym_index` turns it into dictionary-id
form once, at start-up, so that substitution at training time is a dictionary
lookup on id tuples with no text decoding.
"""

import json
import logging
import os
from typing import Dict, Iterable, List, Tuple

import numpy as np

from .augmentations import AugmentationConfigError, SynonymIndex
from .vocabulary import APPENDED_SYMBOLS

logger = logging.getLogger(__name__)

#: sentencepiece marks the first piece of a word with this character.
WORD_START = "\u2581"


def load_synonym_table(path: str) -> Dict[str, List[str]]:
    """Read a synonym table, checking its shape; errors name the file."""
    if not path:
        raise AugmentationConfigError(
            "'subs' needs a synonym table: pass --synonym-table (a JSON word -> [synonyms])"
        )
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise AugmentationConfigError(f"--synonym-table: cannot read file '{path}'")
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AugmentationConfigError(f"--synonym-table: '{path}' is not valid JSON ({e})") from None
    except RecursionError:
        raise AugmentationConfigError(
            f"--synonym-table: '{path}' is nested too deeply to be a table word -> [synonyms]"
        ) from None
    if not isinstance(table, dict):
        raise AugmentationConfigError(
            f"--synonym-table: '{path}' must hold a JSON object word -> [synonyms], "
            f"found {type(table).__name__}"
        )
    for word, syns in table.items():
        if not isinstance(syns, list) or not all(isinstance(s, str) for s in syns):
            raise AugmentationConfigError(
                f"--synonym-table: '{path}': the value of '{word}' must be a list of strings"
            )
    return table


def word_start_mask(dictionary, tokenizer=None) -> np.ndarray:
    """True for dictionary symbols that begin a word (by the tokenizer's rule) and special symbols."""
    symbols = dictionary.symbols
    if tokenizer is None:
        mask = np.array([s.startswith(WORD_START) for s in symbols], dtype=bool)
        what = "a sentencepiece dictionary (symbols starting with '\u2581')"
    else:
        mask = np.array([tokenizer.is_word_start(s) for s in symbols], dtype=bool)
        what = f"word boundaries, but no symbol of this dict.txt starts a word for the {tokenizer.kind} tokenizer"
    if not mask[dictionary.nspecial:].any():
        raise AugmentationConfigError(
            f"'subs' needs {what}; the dictionary and the tokenizer do not belong together"
            " (build the data with clear-prepare, or clear-prepare --tokenizer-from MODEL_DIR)"
        )
    mask[: dictionary.nspecial] = True
    for special in APPENDED_SYMBOLS:
        if special in dictionary.indices:
            mask[dictionary.indices[special]] = True
    return mask


def _case_variants(word: str, synonyms: List[str]) -> Iterable[Tuple[str, List[str]]]:
    yield word, synonyms
    cap = word[:1].upper() + word[1:]
    if cap != word:
        yield cap, [s[:1].upper() + s[1:] for s in synonyms]


def build_synonym_index(table: Dict[str, List[str]], dictionary, tokenizer) -> SynonymIndex:
    """Map every table word (and its capitalised form) to the dictionary ids of its synonyms.

    Words and synonyms are tokenised with the corpus's own tokenizer (a
    :class:`~fairseq_clear.vocabulary.Tokenizer`, or the path of a sentencepiece
    model), as they read inside a sentence and, capitalised, at its start, so a
    synonym may have a different number of pieces than the word it replaces.
    Entries whose pieces are not all in the dictionary are skipped and counted.
    """
    from . import vocabulary

    if not isinstance(tokenizer, vocabulary.Tokenizer):
        if not tokenizer or not os.path.isfile(tokenizer):
            raise AugmentationConfigError(
                f"--sentencepiece-model: 'subs' needs the corpus's sentencepiece model "
                f"to tokenise synonyms; cannot read '{tokenizer}'"
            )
        tokenizer = vocabulary.SentencepieceTokenizer(tokenizer)
    is_start = word_start_mask(dictionary, tokenizer)
    unk = dictionary.unk()

    entries = []
    for word, syns in table.items():
        syns = [s for s in dict.fromkeys(syns) if s and s != word and " " not in s]
        if not syns or " " in word:
            continue
        # (lower-case form inside a sentence, capitalised form at its start)
        for (w, ss), initial in zip(_case_variants(word, syns), (False, True)):
            entries.append((w, ss, False))
            if initial and tokenizer.initial_words_differ:
                entries.append((w, ss, True))  # GPT-2: a sentence's first word has no 'Ġ'
    ids = {}
    for w, ss, initial in entries:
        for text in [w] + ss:
            if (text, initial) in ids:
                continue
            arr = np.array([dictionary.index(p) for p in tokenizer.word_symbols(text, initial)], dtype=np.int64)
            ids[(text, initial)] = arr if len(arr) and not (arr == unk).any() else None
    entries = [((w, initial), [(s, initial) for s in ss]) for w, ss, initial in entries]
    ids = {k: v for k, v in ids.items() if v is not None}

    synonyms: Dict[Tuple[int, ...], List[np.ndarray]] = {}
    skipped = 0
    for word, syns in entries:
        key = ids.get(word)
        options = [ids[s] for s in syns if s in ids]
        if key is None or not options:
            skipped += 1
            continue
        synonyms.setdefault(tuple(key.tolist()), []).extend(options)
    if not synonyms:
        raise AugmentationConfigError(
            f"--synonym-table: none of its {len(table)} entries is usable with this dictionary "
            "(empty table, or every word or synonym has pieces outside dict.txt): 'subs' would "
            "change nothing. Build the table from this corpus with clear-synonyms"
        )
    logger.info(
        "synonym index: %d word forms with synonyms (%d table entries skipped: "
        "pieces outside the dictionary or no usable synonym)",
        len(synonyms),
        skipped,
    )
    return SynonymIndex(is_start, synonyms)


def synonym_coverage(index: SynonymIndex, sentences: Iterable[np.ndarray]) -> Tuple[int, int]:
    """(words with at least one synonym, words) over token-id sentences."""
    covered = total = 0
    for tokens in sentences:
        words = index.words(np.asarray(tokens))
        total += len(words)
        covered += sum(1 for w in words if w in index.synonyms)
    return covered, total


def load_synonym_index(path: str, dictionary, tokenizer) -> SynonymIndex:
    return build_synonym_index(load_synonym_table(path), dictionary, tokenizer)
