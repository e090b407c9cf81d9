"""SentEval's semantic textual similarity tasks: readers and scoring.

Layout (SentEval's ``data/downstream/STS`` and ``SICK``)::

    STS12-en-test/STS.input.MSRpar.txt     sentence1 <TAB> sentence2
    STS12-en-test/STS.gs.MSRpar.txt        gold score, or an empty line (pair not scored)
    ...                                    STS13 .. STS16 alike
    STSBenchmark/sts-{train,dev,test}.csv  genre, file, year, id, score, s1, s2 [, extra columns]
    SICK/SICK_test_annotated.txt           header; pair_ID, A, B, relatedness, entailment

Readers follow SentEval: unscored STS12-16 pairs are left out, sentences are
split on whitespace and re-joined with single spaces. Unlike SentEval, a
malformed line is reported with its file and line number instead of raising
an IndexError, or skipped and counted with ``skip_malformed=True``. A gold score
outside its format's documented range (STS12-16 and STS-B: 0 to 5; SICK's
relatedness: 1 to 5), NaN or infinite, is a malformed line.

Scores are Spearman's rank correlation of cosine similarity with the gold
score, x100. For STS12-16, where each year has several subsets, the year's
score uses SentEval's "all" aggregation as SimCSE reports it: one Spearman over
the pairs of all subsets pooled together (not the mean of per-subset scores).
"""

import logging
import math
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from ..errors import FairseqClearError, NotUtf8Error

logger = logging.getLogger(__name__)

#: SentEval's subsets per year (STS13 without SMT, which is not redistributable)
STS_YEARS = {
    "STS12": ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"],
    "STS13": ["FNWN", "headlines", "OnWN"],
    "STS14": ["deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"],
    "STS15": ["answers-forums", "answers-students", "belief", "headlines", "images"],
    "STS16": ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"],
}
#: the tasks of the paper's Table 2, in its column order
TABLE2_TASKS = ["SICK-R", "STS-B", "STS12", "STS13", "STS14", "STS15", "STS16"]
ALL_TASKS = list(STS_YEARS) + ["STS-B", "SICK-R"]
#: where each task lives below an STS directory
TASK_DIRS = {**{year: f"{year}-en-test" for year in STS_YEARS}, "STS-B": "STSBenchmark", "SICK-R": "SICK"}
#: SentEval's tokenized, lowercased copy inside a directory that also has the raw files
SENTEVAL_COPY_DIR = "senteval_tokenized_lowercased"
#: the gold scores each format documents: STS12-16 and STS-B from 0 (unrelated) to 5 (equivalent),
#: SICK's relatedness from 1 to 5
STS_SCORE_RANGE = (0.0, 5.0)
SICK_SCORE_RANGE = (1.0, 5.0)


class STSFormatError(FairseqClearError, ValueError):
    """An STS file has malformed lines; the message gives file and line numbers."""


@dataclass
class StsPairs:
    """Scored sentence pairs of one subset (or a concatenation of subsets)."""

    name: str
    sent1: List[str]
    sent2: List[str]
    scores: np.ndarray
    #: per-subset slices for concatenations (STS12-16): subset -> (start, end)
    subsets: Dict[str, tuple] = field(default_factory=dict)
    #: malformed lines skipped (skip_malformed=True), as "file:line: reason"
    skipped: List[str] = field(default_factory=list)

    def __len__(self):
        return len(self.scores)


def _normalize(sentence: str) -> str:
    # SentEval splits on whitespace and SimCSE's batcher joins with one space
    return " ".join(sentence.split())


def _read_lines(path: str) -> List[str]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"STS file '{path}' does not exist")
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read().splitlines()
    except UnicodeDecodeError as e:
        raise NotUtf8Error(path, e) from None


def _finish(problems: List[str], skip_malformed: bool, what: str):
    if not problems:
        return
    if not skip_malformed:  # one line: the command prints it as its one error line
        shown = "; ".join(problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise STSFormatError(
            f"{what}: {len(problems)} malformed line(s): {shown}{more} "
            "(fix the file, or leave such lines out with skip_malformed / clear-eval-sts --skip-malformed)"
        )
    for p in problems:
        logger.warning("skipped malformed line %s", p)


def _require_pairs(scores, path):
    # a score over no pairs is not a score: an empty (or all-unscored) file is an error
    if not scores:
        raise STSFormatError(f"STS file '{path}' holds no scored sentence pair (empty or truncated?)")


def parse_score(text: str, what: str, bounds: Tuple[float, float]) -> Tuple[Optional[float], str]:
    """(the gold score, "") or (None, why not): a finite number within the format's ``bounds``."""
    shown = text.strip()[:30]
    try:
        value = float(text)
    except ValueError:
        return None, f"{what} '{shown}' is not a number"
    if not math.isfinite(value):
        return None, f"{what} '{shown}' is not a finite number"
    low, high = bounds
    if not low <= value <= high:
        return None, f"{what} '{shown}' is outside [{low:g}, {high:g}], the range of the format"
    return value, ""


def read_senteval_subset(directory: str, subset: str, skip_malformed: bool = False) -> StsPairs:
    """``STS.input.SUBSET.txt`` + ``STS.gs.SUBSET.txt`` (scored pairs only)."""
    input_path = os.path.join(directory, f"STS.input.{subset}.txt")
    gold_path = os.path.join(directory, f"STS.gs.{subset}.txt")
    inputs, golds = _read_lines(input_path), _read_lines(gold_path)
    problems, sent1, sent2, scores = [], [], [], []
    if len(inputs) != len(golds):
        problems.append(
            f"{gold_path}: {len(golds)} lines but {input_path} has {len(inputs)} "
            "(pairs and scores are matched by line)"
        )
        _finish(problems, False, input_path)  # nothing can be matched safely
    for lineno, (pair, gold) in enumerate(zip(inputs, golds), start=1):
        gold = gold.strip()
        if not gold:
            continue  # SentEval: an empty gold line means the pair is not scored
        fields = pair.split("\t")
        if len(fields) < 2:
            problems.append(f"{input_path}:{lineno}: expected sentence1<TAB>sentence2, found {len(fields)} field(s)")
            continue
        score, problem = parse_score(gold, "gold score", STS_SCORE_RANGE)
        if score is None:
            problems.append(f"{gold_path}:{lineno}: {problem}")
            continue
        sent1.append(_normalize(fields[0]))
        sent2.append(_normalize(fields[1]))
        scores.append(score)
    _finish(problems, skip_malformed, input_path)
    _require_pairs(scores, input_path)
    return StsPairs(subset, sent1, sent2, np.asarray(scores, dtype=np.float64), skipped=problems)


def read_sts_year(directory: str, year: str, skip_malformed: bool = False) -> StsPairs:
    """All subsets of STS12..STS16, concatenated (``subsets`` keeps their slices)."""
    if year not in STS_YEARS:
        raise ValueError(f"unknown STS year '{year}', choose from {list(STS_YEARS)}")
    pairs = StsPairs(year, [], [], np.zeros(0))
    scores = []
    for subset in STS_YEARS[year]:
        part = read_senteval_subset(directory, subset, skip_malformed)
        start = len(pairs.sent1)
        pairs.sent1 += part.sent1
        pairs.sent2 += part.sent2
        scores.append(part.scores)
        pairs.subsets[subset] = (start, len(pairs.sent1))
        pairs.skipped += part.skipped
    pairs.scores = np.concatenate(scores)
    return pairs


# ---- the STS-B and SICK formats: one reader of each, for evaluation and clear-prepare-pairs ----

#: SICK's columns in its release order (SentEval's copies are read by these positions)
SICK_COLUMNS = ("pair_ID", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment")
#: SICK's file of each split (SentEval's SICK folder)
SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
#: what :func:`sick_rows` says of a blank line (clear-prepare-pairs passes over those, as in every format)
EMPTY_LINE = "empty line"


def sts_benchmark_record(line: str):
    """(score text, sentence1, sentence2) of a line of the original STS-B csv (sts-*.csv: genre,
    file, year, id, score, sentence1, sentence2[, sources]); ValueError if it has fewer fields."""
    fields = line.strip().split("\t")
    if len(fields) < 7:
        raise ValueError(f"expected at least 7 tab-separated columns, found {len(fields)}")
    return fields[4], fields[5], fields[6]


def sick_columns(header: str) -> Dict[str, int]:
    """The column of each of ``SICK_COLUMNS`` present in a SICK header line: by name, or, for a
    header that names none of them, SICK's release order."""
    names = [h.strip().lower() for h in header.split("\t")]
    found = {c: names.index(c.lower()) for c in SICK_COLUMNS if c.lower() in names}
    return found or {c: k for k, c in enumerate(SICK_COLUMNS)}


def sick_rows(path: str, columns: Sequence[str]) -> List[Tuple[int, Optional[Dict[str, str]], str]]:
    """The one reader of SICK's layout (SICK-R and SICK-E of the evaluations, clear-prepare-pairs):
    each line after the header as (line number, {column: text} of ``columns``, ""), the columns of
    SICK_COLUMNS where the header names them, else at SICK's release positions; a malformed line
    (empty, too few tab-separated columns) as (line number, None, why). What a value must be is the
    caller's to check."""
    lines = _read_lines(path)
    found = sick_columns(lines[0] if lines else "")
    index = {c: found.get(c, SICK_COLUMNS.index(c)) for c in columns}
    need = max(index.values()) + 1
    rows = []
    for lineno, line in enumerate(lines[1:], start=2):
        fields = line.strip().split("\t") if line.strip() else []
        if len(fields) < need:
            rows.append((lineno, None, f"expected at least {need} tab-separated columns, found {len(fields)}"
                         if fields else EMPTY_LINE))
        else:
            rows.append((lineno, {c: fields[i] for c, i in index.items()}, ""))
    return rows


def read_sts_benchmark(path: str, skip_malformed: bool = False) -> StsPairs:
    """An STS-B csv (tab-separated; score, s1, s2 in columns 5-7; extra columns ignored)."""
    problems, sent1, sent2, scores = [], [], [], []
    for lineno, line in enumerate(_read_lines(path), start=1):
        try:
            score_text, s1, s2 = sts_benchmark_record(line)
        except ValueError as e:
            problems.append(f"{path}:{lineno}: {e}")
            continue
        score, problem = parse_score(score_text, "score", STS_SCORE_RANGE)
        if score is None:
            problems.append(f"{path}:{lineno}: {problem} (column 5)")
            continue
        sent1.append(_normalize(s1))
        sent2.append(_normalize(s2))
        scores.append(score)
    _finish(problems, skip_malformed, path)
    _require_pairs(scores, path)
    name = os.path.splitext(os.path.basename(path))[0]
    return StsPairs(name, sent1, sent2, np.asarray(scores, dtype=np.float64), skipped=problems)


def sts_dev_path(path: str) -> str:
    """STS-B's dev file of ``--sts-validation`` (STS_DEV): ``path``, or sts-dev.csv in the directory ``path``."""
    if os.path.isdir(path):
        path = os.path.join(path, "sts-dev.csv")
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise STSFormatError(f"--sts-validation: cannot read '{path}' (give STS-B's sts-dev.csv or its directory)")
    return path


def read_sick(path: str, skip_malformed: bool = False) -> StsPairs:
    """SICK-R: a SICK file's sentence pairs and relatedness scores (:func:`sick_rows`)."""
    problems, sent1, sent2, scores = [], [], [], []
    for lineno, row, why in sick_rows(path, ("sentence_A", "sentence_B", "relatedness_score")):
        score, why = (None, why) if row is None else parse_score(
            row["relatedness_score"], "relatedness score", SICK_SCORE_RANGE)
        if score is None:
            problems.append(f"{path}:{lineno}: {why}")
            continue
        sent1.append(_normalize(row["sentence_A"]))
        sent2.append(_normalize(row["sentence_B"]))
        scores.append(score)
    _finish(problems, skip_malformed, path)
    _require_pairs(scores, path)
    return StsPairs("SICK-R", sent1, sent2, np.asarray(scores, dtype=np.float64), skipped=problems)


def resolve_sts_dirs(sts_dir: str, copy: str = "senteval") -> Dict[str, str]:
    """The directory of each task for ``copy`` = ``senteval`` (tokenized, lowercased) or ``raw``.

    ``senteval`` uses ``STS_DIR/senteval_tokenized_lowercased`` when it exists,
    else STS_DIR itself (SentEval's own download is that copy). SICK has one
    copy; it is looked up in the chosen directory, then in STS_DIR.
    """
    if copy not in ("senteval", "raw"):
        raise ValueError(f"unknown STS copy '{copy}', choose 'senteval' or 'raw'")
    if not os.path.isdir(sts_dir):
        raise FileNotFoundError(f"--sts-dir '{sts_dir}' is not a directory")
    base = sts_dir
    if copy == "senteval" and os.path.isdir(os.path.join(sts_dir, SENTEVAL_COPY_DIR)):
        base = os.path.join(sts_dir, SENTEVAL_COPY_DIR)
    dirs = {}
    for task, name in TASK_DIRS.items():
        # SICK sits beside STS/ in SentEval's download (data/downstream/{STS,SICK})
        candidates = [os.path.join(base, name)] + (
            [os.path.join(sts_dir, name), os.path.join(os.path.dirname(os.path.abspath(sts_dir)), name)]
            if task == "SICK-R" else []
        )
        dirs[task] = next((c for c in candidates if os.path.isdir(c)), candidates[0])
    return dirs


def load_task(task: str, directory: str, skip_malformed: bool = False, split: str = "test") -> StsPairs:
    """One Table 2 task from its directory (STS-B and SICK-R: ``split``)."""
    if task in STS_YEARS:
        return read_sts_year(directory, task, skip_malformed)
    if task == "STS-B":
        pairs = read_sts_benchmark(os.path.join(directory, f"sts-{split}.csv"), skip_malformed)
        pairs.name = "STS-B"
        return pairs
    if task == "SICK-R":
        return read_sick(os.path.join(directory, SICK_FILES[split]), skip_malformed)
    raise ValueError(f"unknown STS task '{task}', choose from {ALL_TASKS}")


def spearman(predicted, gold) -> float:
    """Spearman's rho x100 (NaN when either side is constant)."""
    from scipy.stats import spearmanr

    predicted, gold = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if len(predicted) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(spearmanr(predicted, gold)[0]) * 100.0


def pearson(predicted, gold) -> float:
    """Pearson's r x100 (NaN when either side is constant)."""
    predicted, gold = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if len(predicted) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(np.corrcoef(predicted, gold)[0, 1]) * 100.0


def score_pairs(pairs: StsPairs, similarities: np.ndarray) -> Dict[str, object]:
    """Spearman x100 of ``similarities`` (one per pair): "all" for the whole set, plus
    per-subset scores and SentEval's mean / weighted mean of them where there are subsets
    (``mean``/``wmean`` Spearman; ``pearson_*`` the same with Pearson, as SentEval prints both)."""
    result = {"spearman": spearman(similarities, pairs.scores), "pearson": pearson(similarities, pairs.scores),
              "pairs": len(pairs)}
    if pairs.subsets:
        sizes = np.array([b - a for a, b in pairs.subsets.values()], dtype=np.float64)
        for metric, prefix in ((spearman, ""), (pearson, "pearson_")):
            per = {name: metric(similarities[a:b], pairs.scores[a:b]) for name, (a, b) in pairs.subsets.items()}
            values = np.array(list(per.values()))
            result[f"{prefix}subsets"] = per
            result[f"{prefix}mean"] = float(values.mean())
            result[f"{prefix}wmean"] = float((values * sizes).sum() / sizes.sum())
    return result


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Wang & Isola (2020): E ||f(x) - f(y)||^alpha over positive pairs of unit vectors (lower is better)."""
    x, y = _unit(x), _unit(y)
    return float((np.linalg.norm(x - y, axis=1) ** alpha).mean())


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    """Wang & Isola (2020): log E exp(-t ||f(x) - f(y)||^2) over distinct pairs of unit vectors (lower is better)."""
    import torch

    x = torch.from_numpy(_unit(x))
    if len(x) < 2:
        return float("nan")
    d2 = torch.pdist(x, p=2).pow(2)
    # log-mean-exp, stable for large t
    return float(torch.logsumexp(-t * d2, dim=0) - math.log(d2.numel()))


def _unit(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def alignment_uniformity(a, b, scores, threshold: float = 4.0) -> Dict[str, float]:
    """SimCSE's diagnostics: alignment over the pairs (a[i], b[i]) scored > ``threshold``,
    uniformity over all sentences of both sides."""
    a, b, scores = np.asarray(a), np.asarray(b), np.asarray(scores)
    positive = scores > threshold
    both = np.concatenate([a, b])
    return {
        "alignment": alignment(a[positive], b[positive]) if positive.any() else float("nan"),
        "uniformity": uniformity(both),
        "positive_pairs": int(positive.sum()),
        "sentences": int(len(both)),
    }


def unique_sentences(pairs_list: Sequence[StsPairs]):
    """Every distinct sentence of the pair sets, and each set's row index into that list (embed once)."""
    index: Dict[str, int] = {}
    rows = []
    for pairs in pairs_list:
        r1 = [index.setdefault(s, len(index)) for s in pairs.sent1]
        r2 = [index.setdefault(s, len(index)) for s in pairs.sent2]
        rows.append((np.asarray(r1, dtype=np.int64), np.asarray(r2, dtype=np.int64)))
    return list(index), rows
