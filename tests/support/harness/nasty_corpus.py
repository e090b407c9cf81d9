"""A corpus generator for the bad-input suite: every kind of line that breaks pipelines.

``write_nasty_corpus(directory)`` writes raw files (bytes, not str: invalid UTF-8
and NUL bytes must reach the pipeline as they are) and returns a manifest that
says which nasty case sits on which line, so that a test can check that each one
was kept, altered or dropped *and counted*. Normal English-like sentences (built
here, deterministic) surround the nasty lines, in documents separated by blank
lines, so that the rest of the pipeline has real data to work on.

    python tests/support/harness/nasty_corpus.py OUT_DIR [--big-line-mb 10]
"""

import argparse
import json
import os
import random
from typing import Dict, List

#: case name -> what it is (docs/data.md's bad-input table describes these)
CASES = {
    "blank-line": "an empty line (document separator), also several in a row",
    "whitespace-only": "spaces and tabs only",
    "one-token": "a sentence of one token ('Hi', 'a', '.')",
    "punctuation-only": "punctuation and nothing else",
    "special-token-literals": "the text '[DEL] <mask> <s> </s> <pad> <unk>' (dictionary specials)",
    "del-literal-glued": "'[DEL]' glued to words, repeated until sentencepiece may learn it",
    "invalid-utf8": "bytes that are not UTF-8",
    "nul-bytes": "NUL bytes inside a line, and a line of NULs only",
    "control-chars": "bell, escape sequences, form feed, vertical tab",
    "crlf": "a CRLF line ending",
    "lone-cr": "a carriage return inside a line",
    "unicode-line-breaks": "U+2028, U+2029 and U+0085 inside a line (str.splitlines splits there)",
    "bom": "a byte-order mark at the start of a line",
    "zero-width": "zero-width spaces and joiners",
    "non-latin": "Arabic, CJK and emoji",
    "combining-marks": "a letter with many combining accents",
    "long-word": "one 100,000-character word",
    "big-line": "one line of many megabytes (default 10 MB) without a sentence end",
    "no-synonym-words": "made-up words that no synonym table has",
    "short-document": "a document of one short sentence (too short for span sampling)",
    "empty-file": "a file of 0 bytes",
    "blank-file": "a file of blank lines only",
}

_SUBJECTS = "the cat|a dog|my friend|the old man|the teacher|a small child|the river|our team".split("|")
_VERBS = "sees|likes|follows|finds|watches|builds|reads|makes|loves|moves".split("|")
_OBJECTS = "the ball|a red house|the quiet garden|an idea|the big city|a good film|a story".split("|")
_TAILS = ["", " today", " again", " every day", " with care", " near the sea"]
_WORDS = ("international responsibility extraordinary characteristics neighbourhood "
          "understanding communication environmental").split()


def normal_sentence(rng: random.Random) -> str:
    return (f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} "
            f"{rng.choice(_OBJECTS)}{rng.choice(_TAILS)}.")


def big_line(n_bytes: int) -> bytes:
    """About ``n_bytes`` of long words, no sentence end (Punkt and the encoder must cope)."""
    text = " ".join(_WORDS * (n_bytes // 60 + 1))
    return text[: text.rfind(" ", 0, n_bytes)].encode()


def nasty_lines(big_line_bytes: int) -> List[tuple]:
    """``(case, bytes)`` of each nasty line, in the order written (without line ends)."""
    return [
        ("whitespace-only", b"   \t  "),
        ("one-token", b"Hi"),
        ("one-token", b"a"),
        ("one-token", b"."),
        ("punctuation-only", b"!!! ... ?!"),
        ("special-token-literals", b"[DEL] [DEL] <mask> <s> </s> <pad> <unk>"),
        ("special-token-literals", b"[DEL]"),
        ("del-literal-glued", b"x[DEL]y[DEL]z " * 20),
        ("invalid-utf8", b"caf\xe9 au lait \xff\xfe is here."),
        ("invalid-utf8", b"\xc3\x28 truncated sequence \xe2\x82 here."),
        ("nul-bytes", b"nul\x00in the\x00 middle of this line."),
        ("nul-bytes", b"\x00\x00\x00"),
        ("control-chars", b"\x07bell \x1b[31mred\x1b[0m text\x0c form\x0b feed."),
        ("lone-cr", b"carriage\rreturn inside the line."),
        ("unicode-line-breaks", "one\u2028two\u2029three\u0085four words here.".encode()),
        ("bom", "\ufeffA line that starts with a byte order mark.".encode()),
        ("zero-width", "zero\u200bwidth\u200djoiner\u200cnon joiner.".encode()),
        ("non-latin", "مرحبا بالعالم. 你好，世界。 😀🎉 party!".encode()),
        ("combining-marks", ("e" + "\u0301" * 50 + " accent storm.").encode()),
        ("long-word", b"w" * 100_000),
        ("big-line", big_line(big_line_bytes)),
        ("no-synonym-words", b"Zxqv blorft quuxle snarfed the wibbly grumple."),
    ]


def write_nasty_corpus(directory: str, big_line_bytes: int = 10 * 1024 * 1024, seed: int = 0,
                       documents: int = 60) -> Dict:
    """Write ``train.txt`` (normal documents with nasty lines among them), ``crlf.txt``,
    ``empty.txt``, ``blank.txt`` and a clean ``valid.txt``; returns the manifest.

    Manifest: ``{"files": {name: path}, "train_files": [...], "lines": [{"file", "line",
    "case"}], "cases": {case: count}, "normal_sentences": n}``; ``line`` is 1-based.
    """
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(seed)
    lines: List[bytes] = []
    manifest_lines = []
    nasty = nasty_lines(big_line_bytes)
    n_normal = 0

    def emit(data: bytes, case=None):
        lines.append(data)
        if case:
            manifest_lines.append({"file": "train.txt", "line": len(lines), "case": case})

    # documents of 4-8 normal sentences; a nasty line goes into every other document
    for d in range(documents):
        for _ in range(rng.randint(4, 8)):
            emit(normal_sentence(rng).encode())
            n_normal += 1
        if d % 2 == 0 and nasty:
            case, data = nasty.pop(0)
            emit(data, case)
        emit(b"", "blank-line")
        if d == 3:
            emit(b"", "blank-line")  # several blank lines in a row
            emit(b"", "blank-line")
        if d == 5:
            emit(b"Short one.", "short-document")  # a document of one short sentence
            emit(b"", "blank-line")
    for case, data in nasty:  # whatever did not fit
        emit(data, case)
    paths = {}
    path = os.path.join(directory, "train.txt")
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    paths["train.txt"] = path

    crlf = [normal_sentence(rng).encode() for _ in range(6)]
    paths["crlf.txt"] = os.path.join(directory, "crlf.txt")
    with open(paths["crlf.txt"], "wb") as f:
        f.write(b"\r\n".join(crlf) + b"\r\n")
    n_normal += len(crlf)
    manifest_lines += [{"file": "crlf.txt", "line": i + 1, "case": "crlf"} for i in range(len(crlf))]

    paths["empty.txt"] = os.path.join(directory, "empty.txt")
    open(paths["empty.txt"], "wb").close()
    manifest_lines.append({"file": "empty.txt", "line": 0, "case": "empty-file"})
    paths["blank.txt"] = os.path.join(directory, "blank.txt")
    with open(paths["blank.txt"], "wb") as f:
        f.write(b"\n \n\t\n\n")
    manifest_lines.append({"file": "blank.txt", "line": 0, "case": "blank-file"})

    paths["valid.txt"] = os.path.join(directory, "valid.txt")
    with open(paths["valid.txt"], "wb") as f:
        f.write(b"\n\n".join(
            b" ".join(normal_sentence(rng).encode() for _ in range(3)) for _ in range(20)
        ) + b"\n")

    cases: Dict[str, int] = {}
    for entry in manifest_lines:
        cases[entry["case"]] = cases.get(entry["case"], 0) + 1
    manifest = {
        "files": paths,
        "train_files": [paths[n] for n in ("train.txt", "crlf.txt", "empty.txt", "blank.txt")],
        "lines": manifest_lines,
        "cases": cases,
        "normal_sentences": n_normal,
        "big_line_bytes": big_line_bytes,
    }
    with open(os.path.join(directory, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    assert set(cases) == set(CASES), set(CASES) ^ set(cases)
    return manifest


def synonym_table(path: str) -> str:
    """A small synonym table: normal words have synonyms, the nasty corpus's made-up words not."""
    table = {"cat": ["feline"], "dog": ["hound", "puppy"], "sees": ["notices"], "likes": ["enjoys"],
             "ball": ["sphere"], "river": ["stream"], "story": ["tale"], "big": ["large"]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(table, f)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--big-line-mb", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    manifest = write_nasty_corpus(args.out_dir, int(args.big_line_mb * 1024 * 1024), args.seed)
    print(json.dumps(manifest["cases"], indent=1))


if __name__ == "__main__":
    main()
