"""Readers for SentEval's transfer and probing data, and for the copies of some of it elsewhere.

SentEval's layout (``data/`` of its repository, after ``data/downstream/get_transfer_data.bash``)::

    downstream/MR/rt-polarity.{pos,neg}          latin-1, one tokenized sentence a line
    downstream/CR/custrev.{pos,neg}              latin-1
    downstream/SUBJ/subj.{objective,subjective}  latin-1 (objective is label 1)
    downstream/MPQA/mpqa.{pos,neg}               latin-1
    downstream/SST/binary/sentiment-{train,dev,test}   "sentence<TAB>label" (0/1)
    downstream/SST/fine/sentiment-{train,dev,test}     "label sentence" (0..4)
    downstream/TREC/{train_5500,TREC_10}.label   latin-1, "COARSE:fine question" (6 coarse classes)
    downstream/MRPC/msr_paraphrase_{train,test}.txt    a header, then Quality, #1 ID, #2 ID, #1 String, #2 String
    downstream/SICK/SICK_{train,trial,test_annotated}.txt  a header, then pair_ID, A, B, relatedness, entailment
    downstream/SNLI/{s1,s2,labels}.{train,dev,test}    latin-1 sentences, labels entailment/neutral/contradiction
    downstream/STS/STSBenchmark/sts-{train,dev,test}.csv
    downstream/STS/STS1x-en-test/STS.{input,gs}.SUBSET.txt   STS12..16 (no training: cosine, Spearman)
    probing/<task>.txt                           "tr|va|te<TAB>label<TAB>...<TAB>sentence", UTF-8

Each reader keeps SentEval's rules: its encodings, its label maps, whitespace tokenization
(a sentence here is its tokens joined by one space, what a SentEval batcher sees), header
lines skipped. A malformed line is an error naming the file and line (where SentEval would
stop with an IndexError or KeyError); a missing folder is an error naming it and how to get it.
Labels and scores are held to each task's documented set (a label outside it is an error naming
file, line and value; SICK-R's relatedness 1-5 and STS's gold 0-5, by the readers of ``preprocessing/sts_readers.py``),
and a classification task's train split must hold two classes at least (one scores 100).

Also read, so that the evaluation runs with the data of ``../shared/data``: GLUE's SST-2 (its
67k training phrases; dev, 872 sentences, held out of them; GLUE's dev as test, as it has no
test labels) and MRPC (GLUE's folder holds SentEval's own msr_paraphrase files), and SICK
from an STS folder (clear-eval-sts's ``--sts-dir``).
"""

import io
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ...errors import FairseqClearError, NotUtf8Error
from ...preprocessing.sts_readers import SICK_FILES, sick_rows  # the one reader of SICK's files

#: DeCLUTR's 18 downstream tasks (its scripts/run_senteval.py's DOWNSTREAM_TASKS, in its order, under
#: our names; its paper's "18 downstream tasks"): the mean over these is its "Downstream" column
DECLUTR_DOWNSTREAM = ("CR", "MR", "MPQA", "SUBJ", "SST2", "SST5", "TREC", "MRPC", "SNLI", "SICK-E", "SICK-R",
                      "STS-B", "ImageCaptionRetrieval", "STS12", "STS13", "STS14", "STS15", "STS16")
#: DeCLUTR's tasks this package does not score, and why (SentEval's COCO retrieval trains a ranking model
#: on its own ResNet image features; DeCLUTR's score is the mean of its six recalls R@1, 5, 10 both ways)
NOT_IMPLEMENTED = {"ImageCaptionRetrieval": "not implemented"}
#: the downstream tasks scored here, in the table's order: STS12-16 unsupervised (cosine, Spearman), the
#: rest classifiers/regressors
DOWNSTREAM = ("STS12", "STS13", "STS14", "STS15", "STS16", "MR", "CR", "MPQA", "SUBJ", "SST2", "SST5", "TREC",
              "MRPC", "SNLI", "SICK-E", "SICK-R", "STS-B")
STS_UNSUPERVISED = ("STS12", "STS13", "STS14", "STS15", "STS16")
#: the 10 probing tasks, under the probing paper's short names
PROBING = ("SentLen", "WC", "TreeDepth", "TopConst", "BShift", "Tense", "SubjNum", "ObjNum", "SOMO", "CoordInv")
PROBING_FILES = {
    "SentLen": "sentence_length.txt", "WC": "word_content.txt", "TreeDepth": "tree_depth.txt",
    "TopConst": "top_constituents.txt", "BShift": "bigram_shift.txt", "Tense": "past_present.txt",
    "SubjNum": "subj_number.txt", "ObjNum": "obj_number.txt", "SOMO": "odd_man_out.txt",
    "CoordInv": "coordination_inversion.txt",
}
#: SentEval's own task names (``se.eval([...])``), accepted as aliases
SENTEVAL_NAMES = {
    "SICKEntailment": "SICK-E", "SICKRelatedness": "SICK-R", "STSBenchmark": "STS-B", "Length": "SentLen",
    "WordContent": "WC", "Depth": "TreeDepth", "TopConstituents": "TopConst", "BigramShift": "BShift",
    "SubjNumber": "SubjNum", "ObjNumber": "ObjNum", "OddManOut": "SOMO", "CoordinationInversion": "CoordInv",
}
GROUPS = {"downstream": DOWNSTREAM, "probing": PROBING, "all": DOWNSTREAM + PROBING}
#: every task a name can select
TASKS = DOWNSTREAM + PROBING
#: folders under SentEval's data/downstream
TASK_FOLDERS = {"MR": "MR", "CR": "CR", "SUBJ": "SUBJ", "MPQA": "MPQA", "SST2": "SST/binary", "SST5": "SST/fine",
                "TREC": "TREC", "MRPC": "MRPC", "SICK-E": "SICK", "SNLI": "SNLI", "SICK-R": "SICK",
                "STS-B": "STS/STSBenchmark", **{t: f"STS/{t}-en-test" for t in STS_UNSUPERVISED}}
TREC_LABELS = {"ABBR": 0, "DESC": 1, "ENTY": 2, "HUM": 3, "LOC": 4, "NUM": 5}
SICK_E_LABELS = {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}
SNLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
#: each probing task's classes as SentEval's data/probing/README.md documents them (WC: its 1,000 target
#: words, not listed there)
PROBING_LABELS = {
    "SentLen": tuple(str(k) for k in range(6)),  # 6 length bins
    "TreeDepth": tuple(str(k) for k in range(5, 13)),  # depth 5 to 12
    "TopConst": ("ADVP_NP_VP_.", "CC_ADVP_NP_VP_.", "CC_NP_VP_.", "IN_NP_VP_.", "NP_ADVP_VP_.", "NP_NP_VP_.",
                 "NP_PP_.", "NP_VP_.", "OTHER", "PP_NP_VP_.", "RB_NP_VP_.", "SBAR_NP_VP_.", "SBAR_VP_.", "S_CC_S_.",
                 "S_NP_VP_.", "S_VP_.", "VBD_NP_VP_.", "VP_.", "WHADVP_SQ_.", "WHNP_SQ_."),
    "BShift": ("I", "O"), "Tense": ("PAST", "PRES"), "SubjNum": ("NN", "NNS"), "ObjNum": ("NN", "NNS"),
    "SOMO": ("C", "O"), "CoordInv": ("I", "O"),
}
#: GLUE SST-2: how many training phrases are held out as dev (the size of SentEval's SST dev)
GLUE_SST_DEV = 872

HOW_TO_GET = ("SentEval's data/downstream/get_transfer_data.bash downloads it (git clone "
              "https://github.com/facebookresearch/SentEval; cd SentEval/data/downstream; "
              "./get_transfer_data.bash), then give --senteval-data SentEval/data")
HOW_TO_GET_PROBING = ("the probing files ship with SentEval's repository (git clone "
                      "https://github.com/facebookresearch/SentEval), then give --senteval-data SentEval/data")


class SentEvalDataError(FairseqClearError, ValueError):
    """A SentEval data file that cannot be read as its task's format; the message names file and line."""


class SentEvalMissingError(FairseqClearError, FileNotFoundError):
    """A task's folder or file is not there; the message names it and how to get it."""


@dataclass
class TaskData:
    """One task's sentences and labels.

    ``splits[name]``: a list of columns, sentences (one or two lists of str) then labels (an
    int array; floats for SICK-R/STS-B), in file order. ``protocol``: how SentEval scores it."""

    name: str
    protocol: str  # innerkfold | kfold | split | relatedness | cosine (STS12-16: no training)
    nclasses: int
    splits: Dict[str, list]
    source: str
    note: str = ""
    pair: bool = False
    features: str = "senteval"  # senteval [|u-v|, u*v] | snli [u, v, u*v, |u-v|]
    classifier: Optional[dict] = None  # the task's own changes to the classifier config
    noreg: bool = False
    f1: bool = False
    files: List[str] = field(default_factory=list)
    #: STS12-16: each subset's slice of the test pairs (SentEval scores subsets, then averages them)
    subsets: Dict[str, tuple] = field(default_factory=dict)

    def sentences(self) -> List[str]:
        """Every distinct sentence, in first-seen order."""
        seen = {}
        for columns in self.splits.values():
            for column in columns[:-1]:
                for s in column:
                    seen.setdefault(s, None)
        return list(seen)

    def sizes(self) -> Dict[str, int]:
        return {k: len(v[-1]) for k, v in self.splits.items()}


def resolve_tasks(spec: str) -> List[str]:
    """``--tasks``: comma-separated task names (ours or SentEval's) and groups (downstream, probing, all)."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise SentEvalDataError(f"--tasks is empty; give task names or groups ({', '.join(GROUPS)})")
    out = []
    lower = {t.lower(): t for t in TASKS}
    lower.update({k.lower(): v for k, v in SENTEVAL_NAMES.items()})
    for n in names:
        if n.lower() in GROUPS:
            tasks = GROUPS[n.lower()]
        elif n.lower() in lower:
            tasks = (lower[n.lower()],)
        elif n.lower() in {t.lower() for t in NOT_IMPLEMENTED}:
            raise SentEvalDataError(f"--tasks: {n} is not implemented here (SentEval's COCO image-caption retrieval "
                                    "needs its image features); the Downstream average says it is missing")
        else:
            raise SentEvalDataError(f"--tasks: unknown task '{n}'; known: {', '.join(TASKS)} "
                                    f"(or SentEval's names), and the groups {', '.join(GROUPS)}")
        out.extend(t for t in tasks if t not in out)
    return out


# ---- low-level reading ---------------------------------------------------------------------------

def _text(path: str, encoding: str) -> str:
    if not os.path.isfile(path):
        raise SentEvalMissingError(f"'{path}' is missing")
    try:
        with io.open(path, "r", encoding=encoding) as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise NotUtf8Error(path, e) from None
    except OSError as e:  # a folder, a file we may not read: the command's one error line
        raise SentEvalDataError(f"cannot read '{path}' ({e.strerror or e})") from None


def _lines(path: str, encoding: str = "utf-8") -> List[str]:
    # SentEval's `for line in f` over a text file: newlines translated, split on \n only
    return _text(path, encoding).split("\n")


def _tokens(text: str) -> str:
    return " ".join(text.split())


def _fail(path, problems):
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise SentEvalDataError(f"{len(problems)} malformed line(s): " + "; ".join(problems[:5]) + more)


def _require(path, rows, what="examples"):
    if not rows:
        raise SentEvalDataError(f"'{path}' holds no {what}")


def _two_classes(path, labels):
    """A classifier trained on one class scores 100 on a test split of that class: refuse it."""
    classes = sorted({str(y) for y in labels})
    if len(classes) < 2:
        raise SentEvalDataError(f"{path}: the train split holds one class ({', '.join(classes)}); a classification "
                                "task needs at least two")


def _folder(root: str, task: str) -> str:
    return os.path.join(root, "downstream", *TASK_FOLDERS[task].split("/"))


def _check_folder(folder: str, task: str, files: Sequence[str], how: str = HOW_TO_GET):
    if not os.path.isdir(folder):
        raise SentEvalMissingError(f"{task}: folder '{folder}' is missing; {how}")
    missing = [f for f in files if not os.path.isfile(os.path.join(folder, f))]
    if missing:
        raise SentEvalMissingError(f"{task}: '{folder}' lacks {', '.join(missing)}; {how}")


# ---- SentEval's formats --------------------------------------------------------------------------

BINARY_FILES = {"MR": ("rt-polarity.pos", "rt-polarity.neg"), "CR": ("custrev.pos", "custrev.neg"),
                "SUBJ": ("subj.objective", "subj.subjective"), "MPQA": ("mpqa.pos", "mpqa.neg")}


def read_binary(folder: str, task: str) -> TaskData:
    """MR, CR, SUBJ, MPQA: the first file's sentences are label 1 (SUBJ: objective), the second's 0."""
    _check_folder(folder, task, BINARY_FILES[task])
    pos, neg = ([_tokens(line) for line in _text(os.path.join(folder, f), "latin-1").splitlines()]
                for f in BINARY_FILES[task])
    for f, rows in zip(BINARY_FILES[task], (pos, neg)):
        _require(os.path.join(folder, f), rows, "sentences")
    labels = np.array([1] * len(pos) + [0] * len(neg), dtype=np.int64)
    return TaskData(task, "innerkfold", 2, {"all": [pos + neg, labels]}, folder,
                    files=[os.path.join(folder, f) for f in BINARY_FILES[task]])


def read_sst(folder: str, nclasses: int) -> TaskData:
    """SST binary ("sentence<TAB>label") or fine-grained ("label sentence", 0..4)."""
    task = "SST2" if nclasses == 2 else "SST5"
    names = {"train": "sentiment-train", "dev": "sentiment-dev", "test": "sentiment-test"}
    valid = {str(k) for k in range(nclasses)}  # SentEval's int(): these digits only
    _check_folder(folder, task, names.values())
    splits = {}
    for split, name in names.items():
        path = os.path.join(folder, name)
        sents, labels, problems = [], [], []
        for lineno, line in enumerate(_lines(path), 1):
            if not line.strip():
                continue
            if nclasses == 2:
                parts = line.strip().split("\t")
                text, label = (parts[0], parts[1]) if len(parts) >= 2 else (None, None)
            else:
                parts = line.strip().split(" ", 1)
                label, text = (parts[0], parts[1]) if len(parts) == 2 else (None, None)
            if text is None or label not in valid:
                form = "sentence<TAB>label (0/1)" if nclasses == 2 else "label (0..4) sentence"
                found = f", found label '{label[:20]}'" if text is not None else ""
                problems.append(f"{path}:{lineno}: expected {form}{found}")
                continue
            sents.append(_tokens(text))
            labels.append(int(label))
        _fail(path, problems)
        _require(path, labels)
        if split == "train":
            _two_classes(path, labels)
        splits[split] = [sents, np.array(labels, dtype=np.int64)]
    top = max(int(v[-1].max()) for v in splits.values())
    if top != nclasses - 1:  # SentEval asserts it per file
        raise SentEvalDataError(f"{task}: '{folder}' has labels up to {top}, expected 0..{nclasses - 1}: "
                                f"is this the {'binary' if nclasses == 5 else 'fine-grained'} folder?")
    return TaskData(task, "split", nclasses, splits, folder, files=[os.path.join(folder, n) for n in names.values()])


def read_trec(folder: str) -> TaskData:
    """TREC: "COARSE:fine question", latin-1; the 6 coarse classes."""
    names = {"train": "train_5500.label", "test": "TREC_10.label"}
    _check_folder(folder, "TREC", names.values())
    splits = {}
    for split, name in names.items():
        path = os.path.join(folder, name)
        sents, labels, problems = [], [], []
        for lineno, line in enumerate(_text(path, "latin-1").split("\n"), 1):
            if not line.strip():
                continue
            target, colon, rest = line.strip().partition(":")
            words = rest.split(" ", 1)
            if not colon or len(words) < 2 or target not in TREC_LABELS:
                problems.append(f"{path}:{lineno}: expected COARSE:fine question with COARSE one of "
                                f"{', '.join(TREC_LABELS)}, found '{target[:20]}'")
                continue
            sents.append(_tokens(words[1]))
            labels.append(target)
        _fail(path, problems)
        _require(path, labels)
        if split == "train":
            _two_classes(path, labels)
        splits[split] = [sents, np.array([TREC_LABELS[y] for y in labels], dtype=np.int64)]
    return TaskData("TREC", "kfold", 6, splits, folder, files=[os.path.join(folder, n) for n in names.values()])


def read_mrpc(folder: str) -> TaskData:
    """MRPC: SentEval's msr_paraphrase_{train,test}.txt (also in GLUE's MRPC folder); a header line."""
    names = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}
    _check_folder(folder, "MRPC", names.values())
    splits = {}
    for split, name in names.items():
        path = os.path.join(folder, name)
        a, b, labels, problems = [], [], [], []
        for lineno, line in enumerate(_lines(path), 1):
            if lineno == 1 or not line.strip():
                continue
            text = line.strip().split("\t")
            if len(text) < 5 or text[0] not in ("0", "1"):
                found = f", found Quality '{text[0][:20]}'" if len(text) >= 5 else ""
                problems.append(f"{path}:{lineno}: expected Quality (0/1), #1 ID, #2 ID, #1 String, #2 String{found}")
                continue
            a.append(_tokens(text[3]))
            b.append(_tokens(text[4]))
            labels.append(int(text[0]))
        _fail(path, problems)
        _require(path, labels, "pairs")
        if split == "train":
            _two_classes(path, labels)
        splits[split] = [a, b, np.array(labels, dtype=np.int64)]
    return TaskData("MRPC", "kfold", 2, splits, folder, pair=True, f1=True,
                    files=[os.path.join(folder, n) for n in names.values()])


def read_sick_entailment(folder: str) -> TaskData:
    """SICK-E: sentence_A, sentence_B and the entailment label of each pair (the one SICK reader,
    ``sts_readers.sick_rows``)."""
    _check_folder(folder, "SICK-E", SICK_FILES.values())
    splits = {}
    for split, name in SICK_FILES.items():
        path = os.path.join(folder, name)
        a, b, labels, problems = [], [], [], []
        for lineno, row, why in sick_rows(path, ("sentence_A", "sentence_B", "entailment_judgment")):
            if row is not None and row["entailment_judgment"] not in SICK_E_LABELS:
                why = (f"entailment_judgment '{row['entailment_judgment'][:20]}' is not one of "
                       f"{', '.join(SICK_E_LABELS)}")
            if why:
                problems.append(f"{path}:{lineno}: {why}")
                continue
            a.append(_tokens(row["sentence_A"]))
            b.append(_tokens(row["sentence_B"]))
            labels.append(row["entailment_judgment"])
        _fail(path, problems)
        _require(path, labels, "pairs")
        if split == "train":
            _two_classes(path, labels)
        splits[split] = [a, b, np.array([SICK_E_LABELS[y] for y in labels], dtype=np.int64)]
    return TaskData("SICK-E", "split", 3, splits, folder, pair=True,
                    files=[os.path.join(folder, n) for n in SICK_FILES.values()])


def read_snli(folder: str) -> TaskData:
    """SNLI: s1.*, s2.* (latin-1) and labels.*; features [u, v, u*v, |u-v|], one penalty (1e-9),
    15 epochs of one pass (SentEval's snli.py)."""
    files = [f"{kind}.{split}" for split in ("train", "dev", "test") for kind in ("s1", "s2", "labels")]
    _check_folder(folder, "SNLI", files)
    splits = {}
    for split in ("train", "dev", "test"):
        s1 = [_tokens(x) for x in _text(os.path.join(folder, f"s1.{split}"), "latin-1").splitlines()]
        s2 = [_tokens(x) for x in _text(os.path.join(folder, f"s2.{split}"), "latin-1").splitlines()]
        path = os.path.join(folder, f"labels.{split}")
        raw = _text(path, "utf-8").splitlines()
        if not (len(s1) == len(s2) == len(raw)):
            raise SentEvalDataError(f"SNLI {split}: s1.{split}, s2.{split} and labels.{split} in '{folder}' have "
                                    f"{len(s1)}, {len(s2)} and {len(raw)} lines; they must match")
        bad = [f"{path}:{k}: label '{y[:20]}' is not one of {', '.join(SNLI_LABELS)}"
               for k, y in enumerate(raw, 1) if y not in SNLI_LABELS]
        _fail(path, bad)
        _require(path, raw, "pairs")
        if split == "train":
            _two_classes(path, raw)
        splits[split] = [s1, s2, raw]  # labels stay strings until sorted: SentEval sorts on them
    return TaskData("SNLI", "split", 3, splits, folder, pair=True, features="snli", noreg=True,
                    classifier={"max_epoch": 15, "epoch_size": 1},
                    files=[os.path.join(folder, f) for f in files])


def read_probing(path: str, task: str) -> TaskData:
    """A probing file: partition (tr/va/te), label, ..., sentence; labels numbered in sorted order of
    the training labels (SentEval's probing.py)."""
    if not os.path.isfile(path):
        raise SentEvalMissingError(f"{task}: '{path}' is missing; {HOW_TO_GET_PROBING}")
    parts = {"tr": "train", "va": "dev", "te": "test"}
    rows = {"train": ([], []), "dev": ([], []), "test": ([], [])}
    problems = []
    documented = PROBING_LABELS.get(task)
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        fields = line.rstrip().split("\t")
        if len(fields) < 3 or fields[0] not in parts:
            problems.append(f"{path}:{lineno}: expected tr|va|te<TAB>label<TAB>sentence")
            continue
        if documented and fields[1] not in documented:
            problems.append(f"{path}:{lineno}: label '{fields[1][:30]}' is not one of {task}'s classes "
                            f"({', '.join(documented)})")
            continue
        rows[parts[fields[0]]][0].append(_tokens(fields[-1]))
        rows[parts[fields[0]]][1].append(fields[1])
    _fail(path, problems)
    for tag, split in parts.items():
        _require(path, rows[split][1], f"'{tag}' lines")
    names = sorted(set(rows["train"][1]))
    index = {name: k for k, name in enumerate(names)}
    unseen = sorted({y for split in ("dev", "test") for y in rows[split][1] if y not in index})
    if unseen:
        raise SentEvalDataError(f"{path}: label(s) {', '.join(unseen[:5])} occur in va/te but not in tr")
    _two_classes(path, names)
    splits = {split: [sents, np.array([index[y] for y in labels], dtype=np.int64)]
              for split, (sents, labels) in rows.items()}
    data = TaskData(task, "split", len(names), splits, path, files=[path])
    if task == "WC":
        data.classifier = {"nhid": 0}  # SentEval: WordContent always by logistic regression
    data.note = "labels: " + ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
    return data


def read_relatedness(folder: str, task: str) -> TaskData:
    """SICK-R or STS-B (train, dev, test pairs and their scores), for SentEval's regressor."""
    from ...preprocessing.sts_readers import STSFormatError, load_task

    names = SICK_FILES if task == "SICK-R" else {s: f"sts-{s}.csv" for s in ("train", "dev", "test")}
    _check_folder(folder, task, names.values())
    splits = {}
    for split in ("train", "dev", "test"):
        try:
            pairs = load_task(task, folder, split=split)
        except STSFormatError as e:
            raise SentEvalDataError(str(e)) from None
        splits[split] = [list(pairs.sent1), list(pairs.sent2), np.asarray(pairs.scores, dtype=np.float64)]
    return TaskData(task, "relatedness", 5, splits, folder, pair=True,
                    files=[os.path.join(folder, n) for n in names.values()])


def read_sts_unsupervised(folder: str, task: str) -> TaskData:
    """STS12..STS16: every subset's scored pairs (SentEval's STS.input/STS.gs files), no training."""
    from ...preprocessing.sts_readers import STS_YEARS, STSFormatError, read_sts_year

    names = [f"STS.{kind}.{subset}.txt" for subset in STS_YEARS[task] for kind in ("input", "gs")]
    _check_folder(folder, task, names)
    try:
        pairs = read_sts_year(folder, task)
    except STSFormatError as e:
        raise SentEvalDataError(str(e)) from None
    return TaskData(task, "cosine", 0, {"test": [pairs.sent1, pairs.sent2, pairs.scores]}, folder, pair=True,
                    files=[os.path.join(folder, n) for n in names], subsets=dict(pairs.subsets))


def read_senteval_task(root: str, task: str) -> TaskData:
    """``task`` from SentEval's ``data`` folder (``root``: holds downstream/ and probing/)."""
    if task in PROBING:
        return read_probing(os.path.join(root, "probing", PROBING_FILES[task]), task)
    folder = _folder(root, task)
    if task in BINARY_FILES:
        return read_binary(folder, task)
    if task in ("SST2", "SST5"):
        return read_sst(folder, 2 if task == "SST2" else 5)
    if task == "TREC":
        return read_trec(folder)
    if task == "MRPC":
        return read_mrpc(folder)
    if task == "SICK-E":
        return read_sick_entailment(folder)
    if task == "SNLI":
        return read_snli(folder)
    if task in ("SICK-R", "STS-B"):
        return read_relatedness(folder, task)
    if task in STS_UNSUPERVISED:
        return read_sts_unsupervised(folder, task)
    raise SentEvalDataError(f"unknown task '{task}'")


# ---- the copies in ../shared/data: GLUE and the STS folder ----------------------------------------

def read_glue_sst2(folder: str, dev_size: int = GLUE_SST_DEV, seed: int = 1111) -> TaskData:
    """GLUE's SST-2 (train.tsv, dev.tsv: a header, then "sentence<TAB>label"): train = the training
    phrases less ``dev_size`` held out at random (``seed``) as dev; test = GLUE's dev sentences.
    Not SentEval's SST2 split (6,920 / 872 / 1,821 sentences): its numbers are not comparable."""
    names = ("train.tsv", "dev.tsv")
    _check_folder(folder, "SST2", names, how="give GLUE's SST-2 folder (glue_data/SST-2 of GLUE's download)")
    columns = []
    for name in names:
        path = os.path.join(folder, name)
        sents, labels, problems = [], [], []
        for lineno, line in enumerate(_lines(path), 1):
            if lineno == 1 or not line.strip():
                continue  # header "sentence<TAB>label"
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or parts[1].strip() not in ("0", "1"):
                found = f", found label '{parts[1][:20]}'" if len(parts) == 2 else ""
                problems.append(f"{path}:{lineno}: expected sentence<TAB>label (0/1){found}")
                continue
            sents.append(_tokens(parts[0]))
            labels.append(int(parts[1]))
        _fail(path, problems)
        _require(path, labels)
        if name == "train.tsv":
            _two_classes(path, labels)
        columns.append((sents, np.array(labels, dtype=np.int64)))
    (train_s, train_y), test = columns
    if len(train_y) <= 2 * dev_size:
        dev_size = max(1, len(train_y) // 10)
    perm = np.random.RandomState(seed).permutation(len(train_y))
    dev_idx, train_idx = np.sort(perm[:dev_size]), np.sort(perm[dev_size:])
    splits = {"train": [[train_s[i] for i in train_idx], train_y[train_idx]],
              "dev": [[train_s[i] for i in dev_idx], train_y[dev_idx]],
              "test": [test[0], test[1]]}
    return TaskData("SST2", "split", 2, splits, folder,
                    note=f"GLUE SST-2: train {len(train_idx)} phrases, dev {dev_size} of them held out, "
                    f"test = GLUE dev ({len(test[1])} sentences); not SentEval's split",
                    files=[os.path.join(folder, n) for n in names])


def read_glue_task(glue_dir: str, task: str) -> TaskData:
    """SST2 or MRPC from GLUE's ``glue_data`` folder."""
    if task == "SST2":
        return read_glue_sst2(os.path.join(glue_dir, "SST-2"))
    if task == "MRPC":
        data = read_mrpc(os.path.join(glue_dir, "MRPC"))
        data.note = "GLUE's MRPC folder: SentEval's msr_paraphrase files"
        return data
    raise SentEvalDataError(f"--glue-data holds SST2 and MRPC only, not {task}")


def sts_folder(sts_dir: str, task: str) -> str:
    """The task's folder in clear-eval-sts's --sts-dir (SentEval's tokenized copy; SICK for SICK-E)."""
    from ...preprocessing.sts_readers import resolve_sts_dirs

    return resolve_sts_dirs(sts_dir, "senteval")["SICK-R" if task == "SICK-E" else task]


#: which tasks each kind of data folder provides
GLUE_TASKS = ("SST2", "MRPC")
STS_TASKS = STS_UNSUPERVISED + ("SICK-E", "SICK-R", "STS-B")


def find_task(task: str, senteval_data: Optional[str] = None, glue_data: Optional[str] = None,
              sts_dir: Optional[str] = None) -> Optional[str]:
    """Where ``task`` would be read from ('senteval', 'glue', 'sts'), or None: SentEval's own
    folder first, then GLUE's, then the STS folder."""
    if senteval_data:
        path = (os.path.join(senteval_data, "probing", PROBING_FILES[task]) if task in PROBING
                else _folder(senteval_data, task))
        if os.path.exists(path):
            return "senteval"
    if glue_data and task in GLUE_TASKS:
        sub = os.path.join(glue_data, "SST-2" if task == "SST2" else "MRPC")
        if os.path.isdir(sub):
            return "glue"
    if sts_dir and task in STS_TASKS and os.path.isdir(sts_dir) and os.path.isdir(sts_folder(sts_dir, task)):
        return "sts"
    return None


def load_task(task: str, senteval_data: Optional[str] = None, glue_data: Optional[str] = None,
              sts_dir: Optional[str] = None) -> TaskData:
    """``task``'s data from the first folder that has it (see :func:`find_task`); an error naming
    the folder that is missing, and how to get it, when none has."""
    where = find_task(task, senteval_data, glue_data, sts_dir)
    if where == "senteval" or (where is None and senteval_data):
        return read_senteval_task(senteval_data, task)  # missing: its error names SentEval's folder
    if where == "glue":
        return read_glue_task(glue_data, task)
    if where == "sts":
        folder = sts_folder(sts_dir, task)
        if task in STS_UNSUPERVISED:
            return read_sts_unsupervised(folder, task)
        return read_sick_entailment(folder) if task == "SICK-E" else read_relatedness(folder, task)
    from ...preprocessing.sts_readers import TASK_DIRS

    extra = []
    if task in GLUE_TASKS:
        extra.append(f"--glue-data (GLUE's glue_data folder{': ' + glue_data if glue_data else ''})")
    if task in STS_TASKS:
        extra.append(f"--sts-dir (an STS folder holding {TASK_DIRS.get(task, 'SICK')}"
                     f"{': ' + sts_dir if sts_dir else ''})")
    how = HOW_TO_GET_PROBING if task in PROBING else HOW_TO_GET
    raise SentEvalMissingError(f"{task}: no data: give --senteval-data (SentEval's data folder; {how})"
                               + (" or " + " or ".join(extra) if extra else ""))


def subsample(data: TaskData, n: int, seed: int = 1111) -> TaskData:
    """At most ``n`` examples per split, drawn at random (``seed``), in file order (a smoke run)."""
    import copy

    out = copy.copy(data)
    out.splits = {}
    rng = np.random.RandomState(seed)
    for split, columns in data.splits.items():
        size = len(columns[-1])
        if size <= n:
            out.splits[split] = columns
            continue
        keep = np.sort(rng.permutation(size)[:n])
        out.splits[split] = [c[keep] if isinstance(c, np.ndarray) else [c[i] for i in keep] for c in columns]
        if data.subsets:  # STS12-16 (one split): the subsets' slices of what is kept
            out.subsets = {k: (int(np.searchsorted(keep, a)), int(np.searchsorted(keep, b)))
                           for k, (a, b) in data.subsets.items()}
    if out.note:
        out.note += f"; at most {n} examples per split used"
    return out
