"""``clear-prepare-pairs``: labelled sentence pairs -> binarized (sentence, positive[, hard negative]).

Reads the labelled sets that supervised contrastive training uses and writes
the data directory of ``--task contrastive_pairs``::

    OUT/dict.txt, OUT/<tokenizer files>       copied from --data (the pre-training data or an
                                              imported model), with clear_tokenizer.json
    OUT/sent0/{dict.txt, train.bin, train.idx[, valid.*, test.*]}
    OUT/sent1/...
    OUT/hard_neg/...                          when the rows have hard negatives
    OUT/label/{split}.label                   --negative-pairs: 1 (positive) or 0 (negative pair) per row
    OUT/raw/{split}.{column}                  the raw sentences, one per line
    OUT/pairs.json                            what was read, kept and skipped, by reason

Every column is encoded with --data's tokenizer (sentencepiece, GPT-2 BPE or WordPiece) and
its ids written into fairseq's .bin/.idx directly (direct_binarize.py: what ``fairseq-preprocess
--only-source --srcdict dict.txt`` writes for the text of its pieces, byte for byte), so the pairs
share the model's dictionary.

Formats (``--format``; ``auto`` looks at the file name and header):

========== ===================================================== ==========================
format     input                                                  positive / hard negative
========== ===================================================== ==========================
simcse-csv SimCSE's ``nli_for_simcse.csv``: sent0,sent1[,hard_neg]  as given
nli-jsonl  SNLI / MultiNLI ``*.jsonl`` (gold_label, sentence1/2)    entailment / a contradiction
                                                                  of the same premise
stsb       GLUE STS-B ``*.tsv`` or the original ``sts-*.csv``       score > ``--sts-threshold`` (4)
mrpc       GLUE MRPC ``*.tsv``                                      Quality 1 / Quality 0 of the
                                                                  same #1 sentence
sick       SICK ``SICK_*.txt``                                      ENTAILMENT (or relatedness >
                                                                  ``--sick-score-threshold``) /
                                                                  CONTRADICTION of the same A
quora      Quora ``quora_duplicate_questions.tsv`` / GLUE QQP       is_duplicate 1 / 0 of the same
                                                                  question1
========== ===================================================== ==========================

``--out`` is written through the export's output directory (export/output_dir.py): built in a
marked sibling and moved in when complete, its files listed in its manifest. A rerun into our own
output replaces the files listed there (and removes those it no longer writes: a split or a
hard_neg column of the previous run that the task would read); nothing else in it is touched, and
any other non-empty directory is refused.

Hard negatives are used by default for ``simcse-csv`` (when the column is
there) and ``nli-jsonl`` (SimCSE supervised); ``--hard-negatives`` /
``--no-hard-negatives`` decide for any format. With hard negatives, positive
pairs whose sentence has no negative partner are skipped (and counted).
Nothing is dropped silently: every skipped row is counted by reason, printed
and written to ``pairs.json``.
"""

import collections
import csv
import json
import logging
import os
import shutil
from typing import Dict, Iterable, List, Optional, Tuple

from .. import vocabulary
from . import encode as encode_mod
from .sts_readers import (EMPTY_LINE, SICK_SCORE_RANGE, STS_SCORE_RANGE, parse_score, sick_rows,
                          sts_benchmark_record)
from ..export.output_dir import check_output_dir, staged_output
from . import direct_binarize
from .binarize import count_lines
from ..errors import NotUtf8Error
from ..atomic_files import write_json
from .common import PrepareError

logger = logging.getLogger(__name__)

FORMATS = ("auto", "simcse-csv", "nli-jsonl", "stsb", "mrpc", "sick", "quora")
COLUMNS = ("sent0", "sent1", "hard_neg")
#: the output's manifest names this command: a rerun replaces its own files there
WRITER = "clear-prepare-pairs"
POS, NEG, OTHER = "positive", "negative", "other"


# ---- reading ----------------------------------------------------------------------------

class Rows:
    """Rows read from one split: labelled pairs or ready triples, and the skip counts."""

    def __init__(self):
        self.labelled: List[Tuple[str, str, str]] = []  # (sentence, partner, POS/NEG/OTHER)
        self.triples: List[Tuple[str, str, Optional[str]]] = []
        self.read = 0
        self.skipped = collections.Counter()
        self.has_hard_negative_column = False
        self.hard_negatives_not_read = 0  # rows whose hard_neg --no-hard-negatives left unread

    def skip(self, reason: str):
        self.skipped[reason] += 1


def _clean(text) -> str:
    # one sentence per line in the raw files: no tabs or newlines inside
    return " ".join(str(text or "").split())


def _read_lines(path: str) -> List[str]:
    with open(path, encoding="utf-8-sig", newline="") as f:  # MRPC starts with a BOM
        return [line.rstrip("\r\n") for line in f]


def detect_format(path: str) -> str:
    name = os.path.basename(path).lower()
    if name.endswith(".jsonl"):
        return "nli-jsonl"
    lines = _read_lines(path)
    header = lines[0] if lines else ""
    fields = [h.strip().lower() for h in header.split("\t")]
    if header.replace(" ", "").lower().startswith("sent0,sent1"):
        return "simcse-csv"
    if "relatedness_score" in fields:
        return "sick"
    if "quality" in fields and "#1 string" in fields:
        return "mrpc"
    if "is_duplicate" in fields:
        return "quora"
    if "sentence1" in fields and "score" in fields:
        return "stsb"
    if name.startswith("sts-") and name.endswith(".csv"):
        return "stsb"
    raise PrepareError(
        f"--format auto: cannot tell the format of '{path}' (header: {header[:80]!r}); "
        f"pass --format, one of {', '.join(FORMATS[1:])}"
    )


def read_simcse_csv(path: str, rows: Rows, use_hard: Optional[bool]):
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or [h.strip() for h in header[:2]] != ["sent0", "sent1"]:
            raise PrepareError(f"'{path}': expected a header 'sent0,sent1[,hard_neg]', got {header}")
        has_hard = len(header) > 2 and header[2].strip() == "hard_neg"
        rows.has_hard_negative_column = has_hard
        take_hard = has_hard and use_hard is not False
        if use_hard and not has_hard:
            raise PrepareError(f"--hard-negatives: '{path}' has no hard_neg column")
        for record in reader:
            rows.read += 1
            if len(record) != len(header):
                rows.skip(f"malformed row ({len(record)} fields, expected {len(header)})")
                continue
            s0, s1 = _clean(record[0]), _clean(record[1])
            hard = _clean(record[2]) if take_hard else None
            if not s0 or not s1:
                rows.skip("empty sentence")
                continue
            if take_hard and not hard:
                rows.skip("empty hard negative")
                continue
            rows.triples.append((s0, s1, hard))
            rows.hard_negatives_not_read += has_hard and not take_hard


def read_nli_jsonl(path: str, rows: Rows):
    labels = {"entailment": POS, "contradiction": NEG, "neutral": OTHER}
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            if not line.strip():
                continue
            rows.read += 1
            try:
                record = json.loads(line)
                gold = record["gold_label"]
                premise, hypothesis = _clean(record["sentence1"]), _clean(record["sentence2"])
            except (ValueError, KeyError, TypeError):
                rows.skip("malformed row")
                continue
            if gold not in labels:
                rows.skip(f"no gold label ({gold!r})")
                continue
            if not premise or not hypothesis:
                rows.skip("empty sentence")
                continue
            rows.labelled.append((premise, hypothesis, labels[gold]))


def _tsv_records(path: str, rows: Rows, min_fields: int):
    """(``path:line``, split record) of a tab-separated file after its header (no quoting: GLUE tsvs
    hold bare quotes)."""
    lines = _read_lines(path)
    if not lines:
        raise PrepareError(f"'{path}' is empty")
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        rows.read += 1
        record = line.split("\t")
        if len(record) < min_fields:
            rows.skip(f"malformed row (fewer than {min_fields} fields)")
            continue
        yield f"{path}:{number}", record


def _column(header: List[str], name: str, path: str) -> int:
    lowered = [h.lower() for h in header]
    if name.lower() not in lowered:
        raise PrepareError(f"'{path}' has no '{name}' column (header: {header})")
    return lowered.index(name.lower())


def _score(score_text, where: str, what: str, bounds):
    """The score of a row (None when it has none: counted by the caller); a number outside the
    format's range (``bounds``) or not finite is an error naming ``where`` (file:line)."""
    try:
        float(score_text)
    except ValueError:
        return None
    score, problem = parse_score(score_text, what, bounds)
    if problem:
        raise PrepareError(f"{where}: {problem}")
    return score


def _score_pair(rows: Rows, s1, s2, score_text, threshold: float, what: str, where: str):
    score = _score(score_text, where, f"{what} score", STS_SCORE_RANGE)
    if score is None:
        rows.skip(f"no {what} score")
        return
    s1, s2 = _clean(s1), _clean(s2)
    if not s1 or not s2:
        rows.skip("empty sentence")
        return
    rows.labelled.append((s1, s2, POS if score > threshold else OTHER))


def read_stsb(path: str, rows: Rows, threshold: float):
    first = _read_lines(path)[:1]
    if first and "sentence1" in first[0].split("\t"):  # GLUE layout, with a header
        header = [h.strip() for h in first[0].split("\t")]
        if "score" not in header:
            raise PrepareError(f"'{path}' has no 'score' column (a test split?); STS-B pairs need scores")
        i1, i2, isc = (_column(header, n, path) for n in ("sentence1", "sentence2", "score"))
        for where, record in _tsv_records(path, rows, max(i1, i2, isc) + 1):
            _score_pair(rows, record[i1], record[i2], record[isc], threshold, "STS", where)
        return
    for number, line in enumerate(_read_lines(path), start=1):  # the original sts-*.csv
        if not line.strip():
            continue
        rows.read += 1
        try:
            score_text, s1, s2 = sts_benchmark_record(line)
        except ValueError:
            rows.skip("malformed row (fewer than 7 fields)")
            continue
        _score_pair(rows, s1, s2, score_text, threshold, "STS", f"{path}:{number}")


def read_mrpc(path: str, rows: Rows):
    lines = _read_lines(path)
    if not lines:
        raise PrepareError(f"'{path}' is empty")
    header = [h.strip() for h in lines[0].split("\t")]
    il, i1, i2 = (_column(header, n, path) for n in ("Quality", "#1 String", "#2 String"))
    for _where, record in _tsv_records(path, rows, max(il, i1, i2) + 1):
        s1, s2 = _clean(record[i1]), _clean(record[i2])
        if not s1 or not s2:
            rows.skip("empty sentence")
            continue
        label = record[il].strip()
        if label not in ("0", "1"):
            rows.skip(f"no label ({label!r})")
            continue
        rows.labelled.append((s1, s2, POS if label == "1" else NEG))


def read_sick(path: str, rows: Rows, score_threshold: Optional[float]):
    lines = _read_lines(path)
    if not lines:
        raise PrepareError(f"'{path}' is empty")
    header = [h.strip() for h in lines[0].split("\t")]
    needed = ("sentence_A", "sentence_B", "entailment_judgment", "relatedness_score")
    for name in needed:  # the original release, with its header (SentEval's copies lack the judgments)
        _column(header, name, path)
    judgments = {"ENTAILMENT": POS, "CONTRADICTION": NEG, "NEUTRAL": OTHER}
    for lineno, record, why in sick_rows(path, needed):  # the one SICK reader, as the evaluations'
        if why == EMPTY_LINE:  # as in every format here: blank lines are no rows
            continue
        rows.read += 1
        if record is None:
            rows.skip(f"malformed row ({why})")
            continue
        a, b = _clean(record["sentence_A"]), _clean(record["sentence_B"])
        if not a or not b:
            rows.skip("empty sentence")
            continue
        judgment = judgments.get(record["entailment_judgment"].strip().upper())
        if judgment is None:
            rows.skip(f"unknown entailment judgment ({record['entailment_judgment'].strip()!r})")
            continue
        if score_threshold is not None:
            score = _score(record["relatedness_score"], f"{path}:{lineno}", "relatedness score", SICK_SCORE_RANGE)
            if score is None:
                rows.skip("no relatedness score")
                continue
            # SICK-R: relatedness decides the positives; the other contradictions can
            # still serve as hard negatives
            label = POS if score > score_threshold else (NEG if judgment == NEG else OTHER)
        else:
            label = judgment
        rows.labelled.append((a, b, label))


def read_quora(path: str, rows: Rows):
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t")  # the Quora release quotes fields with newlines
        header = [h.strip() for h in next(reader, [])]
        i1, i2, il = (_column(header, n, path) for n in ("question1", "question2", "is_duplicate"))
        for record in reader:
            rows.read += 1
            if len(record) <= max(i1, i2, il):
                rows.skip("malformed row")
                continue
            q1, q2, label = _clean(record[i1]), _clean(record[i2]), record[il].strip()
            if not q1 or not q2:
                rows.skip("empty sentence")
                continue
            if label not in ("0", "1"):
                rows.skip(f"no label ({label!r})")
                continue
            rows.labelled.append((q1, q2, POS if label == "1" else NEG))


def read_split(paths: Iterable[str], fmt: str, args, use_hard: Optional[bool]) -> Rows:
    rows = Rows()
    for path in paths:
        if not os.path.isfile(path):
            raise PrepareError(f"input '{path}' does not exist")
        try:
            _read_file(path, fmt, rows, args, use_hard)
        except UnicodeDecodeError as e:  # raised by any reader, with no file name
            raise NotUtf8Error(path, e) from None
    return rows


def _read_file(path: str, fmt: str, rows: Rows, args, use_hard: Optional[bool]):
    """Add the rows of one input file, in format ``fmt`` (or the one detected)."""
    f = detect_format(path) if fmt == "auto" else fmt
    logger.info("reading %s as %s", path, f)
    if f == "simcse-csv":
        read_simcse_csv(path, rows, use_hard)
    elif f == "nli-jsonl":
        read_nli_jsonl(path, rows)
    elif f == "stsb":
        read_stsb(path, rows, args.sts_threshold)
    elif f == "mrpc":
        read_mrpc(path, rows)
    elif f == "sick":
        read_sick(path, rows, args.sick_score_threshold)
    elif f == "quora":
        read_quora(path, rows)
    else:
        raise PrepareError(f"--format: unknown format '{f}'")


def assemble(rows: Rows, hard_negatives: bool) -> List[Tuple[str, str, Optional[str]]]:
    """Labelled pairs -> (sentence, positive[, hard negative]) rows, counting what is left out.

    With hard negatives, the k-th positive partner of a sentence is matched with
    its k-th negative partner (cycling when there are fewer), as SimCSE's NLI
    triples pair a premise's entailment with a contradiction of the same premise.
    """
    out = list(rows.triples)
    if not rows.labelled:
        return out
    negatives = collections.defaultdict(list)
    if hard_negatives:
        for s, partner, label in rows.labelled:
            if label == NEG:
                negatives[s].append(partner)
    seen_positive = collections.Counter()
    for s, partner, label in rows.labelled:
        if label == OTHER:
            rows.skip("not a positive pair (label/score)")
            continue
        if label == NEG:
            if not hard_negatives:
                rows.skip("negative pair (used only with --hard-negatives)")
            continue  # with hard negatives: counted below, used or not
        if hard_negatives:
            options = negatives.get(s)
            if not options:
                rows.skip("positive pair without a hard negative for its sentence")
                continue
            k = seen_positive[s]
            seen_positive[s] += 1
            out.append((s, partner, options[k % len(options)]))
        else:
            out.append((s, partner, None))
    if hard_negatives:
        used = collections.Counter()
        for s, count in seen_positive.items():
            used[s] = min(count, len(negatives[s]))
        unused = sum(len(v) - used[s] for s, v in negatives.items())
        if unused:
            rows.skipped["negative pair not used as a hard negative"] += unused
    return out


# ---- encoding and binarizing -----------------------------------------------------------

def _tokenizer(args):
    """The tokenizer the pairs are encoded with: --sentencepiece-model, else --data's."""
    try:
        return vocabulary.find(args.data, "--data", args.sentencepiece_model)
    except vocabulary.TokenizerError as e:
        raise PrepareError(str(e)) from None


def prepare(args) -> Dict:
    dict_path = args.dict or os.path.join(args.data, "dict.txt")
    if not os.path.isfile(dict_path):
        raise PrepareError(f"--dict: '{dict_path}' does not exist (is --data a binarized data directory?)")
    tokenizer = _tokenizer(args)
    for path in args.train + args.valid + args.test:
        if not os.path.isfile(path):
            raise PrepareError(f"input '{path}' does not exist")
    check_output_dir(args.out, writer=WRITER)
    splits = {"train": args.train, "valid": args.valid, "test": args.test}
    read = {split: read_split(paths, args.format, args, args.hard_negatives)
            for split, paths in splits.items() if paths}
    hard = args.hard_negatives
    if hard is None and getattr(args, "negative_pairs", False):
        hard = False  # the label-0 pairs are rows of their own
    if hard is None:  # SimCSE's data: use the hard negatives it has
        formats = {detect_format(p) if args.format == "auto" else args.format for p in args.train}
        hard = "nli-jsonl" in formats or (
            "simcse-csv" in formats and read["train"].has_hard_negative_column
        )
    negative_pairs = bool(getattr(args, "negative_pairs", False))
    if negative_pairs and hard:
        raise PrepareError("--negative-pairs keeps the label-0 pairs as rows of their own: pass --no-hard-negatives")
    assembled, report, pair_labels = {}, {}, {}
    for split, rows in read.items():
        if negative_pairs:  # seed 004 §4.1: every labelled pair, with its label (its loss is maximised when 0)
            kept = [(s, p, label) for s, p, label in rows.labelled if label in (POS, NEG)]
            for _ in range(len(rows.labelled) - len(kept)):
                rows.skip("neither a positive nor a negative pair (label/score)")
            triples = [(s, p, None) for s, p, _ in kept] + list(rows.triples)
            pair_labels[split] = [1 if label == POS else 0 for _, _, label in kept] + [1] * len(rows.triples)
        else:
            triples = assemble(rows, hard)
        if hard and any(t[2] is None for t in triples):
            raise PrepareError(
                f"{split}: rows of {splits[split]} have no hard negative; pass --no-hard-negatives"
            )
        assembled[split] = triples
        report[split] = {
            "files": [os.path.abspath(p) for p in splits[split]],
            "rows_read": rows.read,
            "pairs_written": len(triples),
            "skipped": dict(sorted(rows.skipped.items())),
        }
        left_out = rows.hard_negatives_not_read + (0 if hard else sum(1 for t in triples if t[2] is not None))
        if left_out:  # the rows are written, their third column is not
            report[split]["hard_negatives_not_written"] = left_out
            why = "--negative-pairs" if negative_pairs else "--no-hard-negatives"
            logger.warning("%s: the hard_neg of %d rows is not written (%s: the rows are sent0,sent1 only)",
                           split, left_out, why)
    if not assembled["train"]:
        raise PrepareError(
            f"no training pairs in {args.train}: skipped {report['train']['skipped']}"
        )
    columns = list(COLUMNS if hard else COLUMNS[:2])

    with staged_output(args.out, writer=WRITER, remove_unwritten=True) as out:
        raw_dir = os.path.join(out, "raw")
        os.makedirs(raw_dir)
        source = args.sentencepiece_model or args.data
        pieces = encode_mod.tokenizer_vocabulary(source, dict_path)[1]
        ids = {c: {} for c in columns}
        for split, triples in assembled.items():
            # every column of the split in one pass of --workers processes
            flat = encode_mod.encode_texts(source, dict_path, [row[k] for k in range(len(columns)) for row in triples],
                                           getattr(args, "workers", 1))
            encoded = [flat[k * len(triples):(k + 1) * len(triples)] for k in range(len(columns))]
            # a row whose sentence normalises to nothing (e.g. only zero-width characters)
            # would become an empty line and shift the columns against each other
            keep = [all(len(col[i]) for col in encoded) for i in range(len(triples))]
            dropped = keep.count(False)
            if dropped:
                report[split]["skipped"]["empty after tokenisation"] = dropped
                report[split]["pairs_written"] -= dropped
                triples = assembled[split] = [t for t, k in zip(triples, keep) if k]
                if negative_pairs:
                    pair_labels[split] = [v for v, k in zip(pair_labels[split], keep) if k]
            if negative_pairs:
                os.makedirs(os.path.join(out, "label"), exist_ok=True)
                with open(os.path.join(out, "label", f"{split}.label"), "w", encoding="utf-8") as f:
                    f.writelines(f"{v}\n" for v in pair_labels[split])
                report[split]["negative_pairs"] = pair_labels[split].count(0)
            if not triples:
                raise PrepareError(f"{split}: no pairs left from {splits[split]}: {report[split]['skipped']}")
            for k, column in enumerate(columns):
                raw = os.path.join(raw_dir, f"{split}.{column}")
                with open(raw, "w", encoding="utf-8") as f:
                    f.writelines(row[k] + "\n" for row in triples)
                ids[column][split] = [line for line, k2 in zip(encoded[k], keep) if k2]
        for column in columns:
            dest = os.path.join(out, column)
            # the encoder's ids straight into fairseq's .bin/.idx (what fairseq-preprocess writes for
            # the text of their pieces, byte for byte: tests/reliability/test_direct_binarize.py)
            direct_binarize.write_rows(dict_path, pieces, ids[column], dest)
            for split, triples in assembled.items():
                n = count_lines(os.path.join(dest, split))
                if n != len(triples):
                    raise PrepareError(
                        f"{os.path.join(args.out, column, split)}: fairseq-preprocess wrote {n} lines for {len(triples)} rows"
                    )
        shutil.copyfile(dict_path, os.path.join(out, "dict.txt"))
        vocabulary.copy_to(tokenizer, out, os.path.join(out, "dict.txt"))
        summary = {
            "format": args.format,
            "columns": columns,
            "hard_negatives": hard,
            "negative_pairs": negative_pairs,
            "sts_threshold": args.sts_threshold,
            "sick_score_threshold": args.sick_score_threshold,
            "tokenizer": tokenizer.describe(),
            "dict": os.path.abspath(dict_path),
            "splits": report,
        }
        write_json(os.path.join(out, "pairs.json"), summary)
    return summary


def print_report(summary: Dict, out: str):
    print(f"wrote {out}: columns {', '.join(summary['columns'])}")
    for split, r in summary["splits"].items():
        skipped = sum(r["skipped"].values())
        print(f"  {split}: {r['rows_read']} rows read, {r['pairs_written']} rows written, "
              f"{skipped} skipped")
        for reason, n in r["skipped"].items():
            print(f"    skipped {n}: {reason}")
