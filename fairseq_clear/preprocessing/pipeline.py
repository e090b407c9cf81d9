"""``clear-prepare RAW... OUT_DIR``: raw text → fairseq data directory for ``--task clear``.

Steps (each skipped when its done-marker matches, see :class:`common.StepMarkers`):

1. ``punkt``       sentence splitter: nltk's pretrained Punkt, or one trained on the corpus
2. ``sentences-*`` raw files → one sentence per line, blank line between documents
3. ``carve``       valid/test documents taken out of the training sentences (if not given)
4. ``spm``         sentencepiece trained on a sample of the training sentences, or
   ``tokenizer``   with ``--tokenizer-from DIR``: the model's tokenizer and dict.txt, copied
5. ``encode-*``    sentences → pieces, in parallel worker processes (streaming)
6. ``dict``        dict.txt from the sentencepiece vocabulary and training frequencies
                   (with ``--tokenizer-from``: the model's dict.txt, unchanged)
7. ``binarize``    as fairseq-preprocess --only-source --srcdict → OUT_DIR/data-bin, checked,
                   then moved in through the export's output directory (export/output_dir.py):
                   a rerun replaces the files its manifest lists, and anything else in data-bin
                   (a checkpoint) stays. ``--binarizer direct`` (the default): step 5 already
                   wrote the dictionary ids in fairseq's format (direct_binarize.py), this step
                   puts them in place; ``--binarizer fairseq``: step 5 writes the pieces as text
                   and this step runs fairseq's binarizer on it (binarize.py)

Intermediate files live in OUT_DIR/work; the summary in OUT_DIR/summary.json.
See docs/data.md.
"""

import argparse
import codecs
import json
import logging
import os
import shutil
import time
from typing import Dict, List, Optional, Sequence

from .. import vocabulary
from ..errors import read_json
from ..atomic_files import atomic_path, atomic_write, remove_stale_tmp, write_json
from ..export.output_dir import MANIFEST, staged_output, written_by
from . import binarize as binarize_mod
from . import direct_binarize
from . import shards as shards_mod
from . import encode as encode_mod
from . import text as text_mod
from .common import (
    DISK_FULL,
    RUN_ONLY_OPTIONS,
    DiskFullError,
    LineReport,
    PrepareError,
    StepMarkers,
    check_input_files,
    check_out_dir_is_ours,
    check_output_dir,
    file_identity,
    fingerprint,
)

logger = logging.getLogger("fairseq_clear.prepare")

SPLITS = ("train", "valid", "test")
#: data-bin's manifest names this command: a rerun replaces its own files there
WRITER = "clear-prepare"
#: the sentence splitter's parameters (in work/; published in an --only-vocab data-bin for the shards)
PUNKT_FILE = "punkt.json"

DEFAULTS = dict(
    valid=None,
    test=None,
    valid_size=0.01,
    test_size=0.01,
    seed=1,
    input_format="auto",
    documents="blank-lines",
    wikitext_headings="drop",
    wikitext_markers="join",
    unk_token=None,
    invalid_utf8="replace",
    punkt="auto",
    punkt_language="english",
    punkt_sample_chars=3_000_000,
    vocab_size=32000,
    model_type="unigram",
    spm_sample_size=1_000_000,
    spm_threads=16,
    character_coverage=0.9999,
    tokenizer_from=None,
    tokens_per_sample=512,
    long_sentences="split",
    binarizer="direct",
    workers=None,
    progress=True,
    remove_intermediate=False,
    force=False,
)


def add_args(parser: argparse.ArgumentParser):
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="raw text files or directories (all files below, sorted) of the "
                        "training corpus, then the output directory")
    g = parser.add_argument_group("splits")
    g.add_argument("--valid", action="append", metavar="FILE",
                   help="raw text of the validation split (repeatable); default: carve "
                   "--valid-size documents out of the training inputs")
    g.add_argument("--test", action="append", metavar="FILE",
                   help="raw text of the test split (repeatable); default: carve "
                   "--test-size documents out of the training inputs")
    g.add_argument("--valid-size", type=float, default=DEFAULTS["valid_size"],
                   help="documents carved out for validation when --valid is not given: a "
                   "fraction (< 1) or a number of documents; 0 = no valid split "
                   "(default: %(default)s)")
    g.add_argument("--test-size", type=float, default=DEFAULTS["test_size"],
                   help="documents carved out for test when --test is not given: a fraction "
                   "(< 1) or a number of documents; 0 = no test split (default: %(default)s)")
    g.add_argument("--seed", type=int, default=DEFAULTS["seed"],
                   help="seed of the carving and of the sentencepiece sample (default: %(default)s)")

    g = parser.add_argument_group("input format")
    g.add_argument("--input-format", choices=text_mod.INPUT_FORMATS, default=DEFAULTS["input_format"],
                   help="text: one paragraph per line, split into sentences with Punkt; lines: "
                   "one sentence per line, not split; wikitext: WikiText .tokens/.raw (' = Title = ' "
                   "starts a document); auto: wikitext for *.tokens/*.raw files or files starting "
                   "with ' = Title = ', else text (default: %(default)s)")
    g.add_argument("--documents", choices=text_mod.DOCUMENT_MODES, default=DEFAULTS["documents"],
                   help="how documents are delimited in text/lines input: blank-lines (a blank "
                   "line ends a document), files (one document per file), lines (every line is "
                   "its own document, e.g. unrelated sentences). Every file ends a document "
                   "(default: %(default)s)")
    g.add_argument("--wikitext-headings", choices=("drop", "keep"), default=DEFAULTS["wikitext_headings"],
                   help="WikiText ' = = Section = = ' lines: drop them (counted) or keep their "
                   "text as a sentence (default: %(default)s)")
    g.add_argument("--wikitext-markers", choices=("join", "keep"), default=DEFAULTS["wikitext_markers"],
                   help="WikiText ' @-@ ', ' @,@ ', ' @.@ ': join them ('role-playing', '1,000', "
                   "'3.5') or keep them as they are (default: %(default)s)")
    g.add_argument("--unk-token", default=DEFAULTS["unk_token"], metavar="STR",
                   help="a literal string in the text that stands for an unknown word, encoded as "
                   "the dictionary's <unk> and kept out of sentencepiece training; '' to treat it "
                   "as text (default: '<unk>' if any input is WikiText, else '')")
    g.add_argument("--invalid-utf8", choices=("replace", "drop"), default=DEFAULTS["invalid_utf8"],
                   help="lines with invalid UTF-8: replace the bad bytes with U+FFFD, or drop the "
                   "line; either way counted (default: %(default)s)")

    g = parser.add_argument_group("sentence splitting")
    g.add_argument("--punkt", choices=("auto", "pretrained", "train"), default=DEFAULTS["punkt"],
                   help="Punkt model: nltk's pretrained one (punkt_tab, needs nltk.download), one "
                   "trained unsupervised on the corpus, or auto = pretrained if installed, else "
                   "train (default: %(default)s)")
    g.add_argument("--punkt-language", default=DEFAULTS["punkt_language"],
                   help="language of the pretrained Punkt model (default: %(default)s)")
    g.add_argument("--punkt-sample-chars", type=int, default=DEFAULTS["punkt_sample_chars"],
                   help="characters of the training inputs to train Punkt on (default: %(default)s)")

    g = parser.add_argument_group("sentencepiece")
    g.add_argument("--vocab-size", type=int, default=DEFAULTS["vocab_size"],
                   help="sentencepiece vocabulary size (32000 for real runs; small corpora get "
                   "a smaller one rather than an error) (default: %(default)s)")
    g.add_argument("--model-type", choices=encode_mod.MODEL_TYPES, default=DEFAULTS["model_type"],
                   help="sentencepiece model type (default: %(default)s)")
    g.add_argument("--spm-sample-size", type=int, default=DEFAULTS["spm_sample_size"],
                   help="training sentences sampled (uniformly, in the workers) to train sentencepiece "
                   "on (default: %(default)s)")
    g.add_argument("--spm-threads", type=int, default=DEFAULTS["spm_threads"],
                   help="threads of sentencepiece's trainer, 1..1024 (its own default, %(default)s). The model "
                   "depends on this number (how the trainer splits its work), so it is its own option, "
                   "not --workers: the same corpus gives the same model at any --workers and on any "
                   "machine (default: %(default)s)")
    g.add_argument("--character-coverage", type=float, default=DEFAULTS["character_coverage"],
                   help="sentencepiece character coverage; rarer characters become <unk> "
                   "(default: %(default)s)")
    g.add_argument("--tokenizer-from", metavar="DIR", default=DEFAULTS["tokenizer_from"],
                   help="encode with the tokenizer and dict.txt of a model directory (one written "
                   "by clear-import-hf, fairseq's roberta.base with encoder.json + vocab.bpe, or a "
                   "clear-prepare data-bin) instead of training sentencepiece, so the data fits "
                   "that model's embeddings; the options above are then not used (default: none)")
    g.add_argument("--tokens-per-sample", type=int, default=DEFAULTS["tokens_per_sample"],
                   help="as in fairseq-train: sentences with more than this minus 2 pieces "
                   "(room for <s> and </s>) are split or truncated, see --long-sentences "
                   "(default: %(default)s)")
    g.add_argument("--long-sentences", choices=encode_mod.LONG_SENTENCE_MODES,
                   default=DEFAULTS["long_sentences"],
                   help="sentences longer than --tokens-per-sample: split them into several "
                   "lines (at word starts) or truncate them; counted (default: %(default)s)")

    g = parser.add_argument_group("running")
    g.add_argument("--binarizer", choices=BINARIZERS, default=DEFAULTS["binarizer"],
                   help="direct: the encoder's ids go straight into fairseq's .bin/.idx; fairseq: "
                   "the pieces are written as text and binarized by fairseq's own binarizer (what "
                   "fairseq-preprocess --only-source --srcdict does, several times slower); both "
                   "write the same files, byte for byte (default: %(default)s)")
    g.add_argument("--workers", type=int, default=DEFAULTS["workers"],
                   help="worker processes for splitting, encoding and fairseq-preprocess "
                   "(default: the number of CPUs)")
    g.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bars")
    g.add_argument("--remove-intermediate", action="store_true",
                   help="delete the large intermediate files in OUT_DIR/work after success "
                   "(a later run with other options then starts from the raw text)")
    g.add_argument("--force", action="store_true",
                   help="ignore the done-markers and run every step again")

    g = parser.add_argument_group("a corpus on many machines (docs/data.md)")
    g.add_argument("--only-vocab", action="store_true",
                   help="train the tokenizer and write dict.txt only (OUT_DIR/data-bin without .bin): "
                   "the --tokenizer-from of the --shards runs")
    g.add_argument("--sample-mb", type=float, default=None, metavar="MB",
                   help="with --only-vocab: read only this many MB of the inputs, evenly spaced "
                   "through every file (default: all of them)")
    g.add_argument("--shards", type=int, default=None, metavar="N",
                   help="deal the training inputs (whole files) into N shards written as "
                   "OUT_DIR/data-bin/shard0 ... (fairseq-train DATA/shard0:DATA/shard1:... reads one "
                   "per epoch; valid and test in shard0); needs --tokenizer-from (default: no shards)")
    g.add_argument("--shard-ids", default=None, metavar="LIST",
                   help="with --shards: the shards this run prepares, e.g. 0,3 or 2-5, so that "
                   "several machines share the work (default: all)")
    return parser


BINARIZERS = ("direct", "fairseq")
SPM_MAX_THREADS = 1024  # sentencepiece's trainer refuses more (trainer_interface.cc), after the steps before it
SENTENCEPIECE_OPTIONS = ("vocab_size", "model_type", "spm_sample_size", "spm_threads", "character_coverage")


def _validate(opts: Dict):
    if opts["tokenizer_from"] is not None:
        clash = [k for k in SENTENCEPIECE_OPTIONS if opts[k] != DEFAULTS[k]]
        if clash:
            raise PrepareError(
                f"--tokenizer-from uses the model's tokenizer; "
                f"{', '.join('--' + k.replace('_', '-') for k in clash)} (training a new "
                "sentencepiece vocabulary) cannot be combined with it")
        check_tokenizer_dir(opts["tokenizer_from"])
    if opts["vocab_size"] < 8:
        raise PrepareError(f"--vocab-size must be >= 8, got {opts['vocab_size']}")
    if opts["tokens_per_sample"] < 3:
        raise PrepareError(f"--tokens-per-sample must be >= 3, got {opts['tokens_per_sample']}")
    if opts["spm_sample_size"] < 1:
        raise PrepareError(f"--spm-sample-size must be >= 1, got {opts['spm_sample_size']}")
    if not 1 <= opts["spm_threads"] <= SPM_MAX_THREADS:
        raise PrepareError(f"--spm-threads must be in 1..{SPM_MAX_THREADS} (sentencepiece's limit), "
                           f"got {opts['spm_threads']}")
    if not 0 < opts["character_coverage"] <= 1:
        raise PrepareError(f"--character-coverage must be in (0, 1], got {opts['character_coverage']}")
    for name in ("valid_size", "test_size"):
        v = opts[name]
        if not 0 <= v < float("inf") or (v >= 1 and v != int(v)):  # nan and inf fail too
            raise PrepareError(
                f"--{name.replace('_', '-')} must be a fraction in [0, 1) or a whole number of "
                f"documents, got {v}"
            )
    if opts["binarizer"] not in BINARIZERS:
        raise PrepareError(f"--binarizer must be one of {', '.join(BINARIZERS)}, got {opts['binarizer']!r}")
    if opts["workers"] is not None and opts["workers"] < 1:
        raise PrepareError(f"--workers must be >= 1, got {opts['workers']}")
    if opts["punkt_sample_chars"] < 1000:
        raise PrepareError(f"--punkt-sample-chars must be >= 1000, got {opts['punkt_sample_chars']}")


class Pipeline:
    def __init__(self, inputs: Sequence[str], out_dir: str, work: Optional[str] = None,
                 data_bin: Optional[str] = None, only_vocab: bool = False, needs_valid: bool = True,
                 **options):
        """``work``, ``data_bin``: other places than OUT_DIR/work and OUT_DIR/data-bin (a shard's,
        shards.py; the summary goes to ``work``); ``only_vocab``: stop after dict.txt and publish
        data-bin with the tokenizer and dict.txt only (a --tokenizer-from for the shards);
        ``needs_valid``: False where no valid split is wanted (a shard after the first)."""
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
        self.opts = dict(DEFAULTS, **options)
        _validate(self.opts)
        self.out_dir = os.path.abspath(out_dir)
        # inputs first, then the output directory: both fail at once, naming the path
        self.files = {"train": check_input_files(list(inputs), "RAW", self.out_dir)}
        for split in ("valid", "test"):
            if self.opts[split]:
                self.files[split] = check_input_files(list(self.opts[split]), f"--{split}",
                                                      self.out_dir)
                if not any(holds_text(f) for f in self.files[split]):  # else found after the training corpus's steps
                    raise PrepareError(f"--{split}: {', '.join(repr(f) for f in self.files[split])} holds no text "
                                       "(empty or blank lines only)")
        seen = {}
        for split, files in self.files.items():  # a file read twice: its documents twice, or evaluated on
            for k, f in enumerate(files):        # what it trained on
                other = seen.setdefault(os.path.realpath(f), (split, f, k))
                if other != (split, f, k):
                    where = "RAW" if other[0] == "train" else f"--{other[0]}"
                    raise PrepareError(f"{'RAW' if split == 'train' else '--' + split}: '{f}' is also given as "
                                       f"{where} ('{other[1]}'); give each file once")
        check_output_dir(self.out_dir)
        check_out_dir_is_ours(self.out_dir)
        if not work and os.path.isfile(os.path.join(self.out_dir, "work", shards_mod.LAYOUT)):
            raise PrepareError(f"OUT_DIR: '{self.out_dir}' holds the shards of a clear-prepare --shards run "
                               f"(work/{shards_mod.LAYOUT}): give its --shards and --tokenizer-from to go on "
                               "with them, or choose another OUT_DIR")
        self.work = os.path.abspath(work) if work else os.path.join(self.out_dir, "work")
        self.summary_path = os.path.join(self.work if work else self.out_dir, "summary.json")
        self.only_vocab = only_vocab
        self.needs_valid = needs_valid and not only_vocab
        os.makedirs(self.work, exist_ok=True)
        remove_stale_tmp(self.work)
        # data-bin's: what an earlier version left (data-bin is now staged by output_dir, which cleans its own)
        remove_stale_tmp(self.out_dir, names=("summary.json", "data-bin", "data-bin.old"))
        self.markers = StepMarkers(os.path.join(self.work, "steps"), self.out_dir)
        self.workers = self.opts["workers"] or os.cpu_count() or 1
        self.data_bin = os.path.abspath(data_bin) if data_bin else os.path.join(self.out_dir, "data-bin")

        formats = {}
        for files in self.files.values():
            for f in files:
                formats[f] = (text_mod.detect_format(f) if self.opts["input_format"] == "auto"
                              else self.opts["input_format"])
        self.formats = formats
        if self.opts["unk_token"] is None:
            self.opts["unk_token"] = "<unk>" if "wikitext" in formats.values() else ""
        self.steps: Dict[str, Dict] = {}
        self.warnings: List[str] = []

    # ---- helpers -----------------------------------------------------------------
    def path(self, name):
        return os.path.join(self.work, name)

    def run_fingerprint(self) -> str:
        """Inputs and every option that changes the output (not --workers, progress, ...)."""
        options = {k: v for k, v in self.opts.items() if k not in RUN_ONLY_OPTIONS}
        # --tokenizer-from's contents, not only its path: a VOCAB rebuilt in place is another tokenizer
        tokenizer = [tokenizer_identity(self.opts["tokenizer_from"])] if self.opts.get("tokenizer_from") else []
        return fingerprint("run", {s: self.ids(s) for s in self.files}, self.formats, options,
                           self.only_vocab, *tokenizer)

    def finished_earlier(self) -> Optional[Dict]:
        """The summary of an earlier complete run with the same inputs and options, if any.

        This lets a run after --remove-intermediate return at once, although the
        intermediate files that the step markers list are gone."""
        marker = self.markers.load("binarize")
        path = self.summary_path
        if (self.opts["force"] or not marker or marker.get("run_fingerprint") != self.run_fingerprint()
                or not self.markers.done("binarize", marker["fingerprint"]) or not os.path.isfile(path)):
            return None
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
        summary["steps"] = {n: {"status": "skipped (done earlier)", "seconds": st["seconds"]}
                            for n, st in summary["steps"].items()}
        summary["seconds"] = 0.0
        return summary

    def run_step(self, name: str, fp: str, fn, outputs: Sequence[str], **extra) -> Dict:
        if not self.opts["force"]:
            marker = self.markers.done(name, fp)
            if marker is not None:
                logger.info("step %s: done earlier, skipped", name)
                self.steps[name] = {"status": "skipped (done earlier)", "seconds": marker["seconds"]}
                return marker["stats"]
        self.markers.clear(name)
        logger.info("step %s: running", name)
        start = time.time()
        try:
            stats = fn()
        except DiskFullError:  # named where it was written
            raise
        except OSError as e:  # a write that did not name its file: the step and its folder, then
            if e.errno not in DISK_FULL:
                raise
            raise DiskFullError(e.filename or self.work, option="" if e.filename else "OUT_DIR",
                                hint=f"the step {name} was writing; free some space and run the same command "
                                     "again: it goes on from this step") from None
        seconds = time.time() - start
        self.markers.mark(name, fp, outputs, stats, seconds, **extra)
        self.steps[name] = {"status": "ran", "seconds": round(seconds, 2)}
        return stats

    def check_data_bin(self):
        """Refuse, before any work, a data-bin that a rerun may not replace file by file: one
        whose manifest does not name clear-prepare (the user's, or an earlier version's)."""
        if os.path.lexists(self.data_bin) and written_by(self.data_bin) != WRITER and not (
                os.path.isdir(self.data_bin) and not os.listdir(self.data_bin)):
            raise PrepareError(f"OUT_DIR: '{self.data_bin}' exists and was not written by clear-prepare (no "
                               f"{MANIFEST} of it there, the list of the files a rerun replaces; a data-bin of "
                               "an earlier version has none either): move it away or choose another OUT_DIR")

    def ids(self, split):
        return [file_identity(f, self.out_dir) for f in self.files[split]]

    # ---- the pipeline ------------------------------------------------------------
    def run(self) -> Dict:
        o = self.opts
        start = time.time()
        earlier = self.finished_earlier()
        if earlier is not None:
            logger.info("all steps done earlier with these inputs and options: nothing to do")
            if o["remove_intermediate"]:
                self._remove_intermediate()
            return earlier
        self.check_data_bin()
        text_options = {
            "formats": self.formats, "documents": o["documents"],
            "wikitext_headings": o["wikitext_headings"], "wikitext_markers": o["wikitext_markers"],
            "invalid_utf8": o["invalid_utf8"],
        }
        text_fp_options = {k: v for k, v in text_options.items() if k != "formats"}

        # 1. sentence splitter
        needs_punkt = any(fmt != "lines" for fmt in self.formats.values())
        train_formats = [self.formats[f] for f in self.files["train"]]
        pretrained = o["punkt"] != "train" and text_mod.pretrained_punkt_installed(o["punkt_language"])
        punkt_fp = fingerprint("punkt", self.ids("train"), train_formats, o["punkt"], pretrained,
                               o["punkt_language"], o["punkt_sample_chars"], o["wikitext_markers"])
        shared_punkt = self.vocabulary_punkt()
        if shared_punkt:
            punkt_fp = fingerprint("punkt", "from the vocabulary", vocabulary.sha256(shared_punkt))
        punkt_stats, punkt_params = None, None
        if needs_punkt:
            punkt_path = self.path(PUNKT_FILE)
            punkt_stats = self.run_step("punkt", punkt_fp, lambda: self._punkt(punkt_path, train_formats),
                                        [punkt_path])
            with open(punkt_path, encoding="utf-8") as f:
                punkt_params = json.load(f)
        else:
            punkt_fp = "none"

        # 2. sentences per group of inputs
        sent_stats, sent_fp, sent_path = {}, {}, {}
        for split in self.files:
            out = self.path(f"{split}.inputs.sent")
            fp = fingerprint("sentences", split, self.ids(split),
                             [self.formats[f] for f in self.files[split]], text_fp_options, punkt_fp)
            sent_stats[split] = self.run_step(
                f"sentences-{split}", fp,
                lambda split=split, out=out: text_mod.split_files(
                    self.files[split], out, text_options, punkt_params, self.workers,
                    o["progress"], desc=f"sentences ({split})"),
                [out])
            sent_fp[split], sent_path[split] = fp, out
            if sent_stats[split]["sentences"] == 0:
                raise PrepareError(
                    f"no sentences in the {split} inputs ({', '.join(self.files[split])}); see "
                    f"{self.markers.path('sentences-' + split)} for what was dropped"
                )

        # 3. carve valid/test out of train
        carve_sizes = {s: o[f"{s}_size"] for s in ("valid", "test") if s not in self.files}
        carve_sizes = {s: v for s, v in carve_sizes.items() if v > 0}
        split_source = {s: (sent_path[s], sent_fp[s]) for s in self.files}
        carve_stats = None
        if carve_sizes:
            outs = {s: self.path(f"{s}.sent") for s in ["train"] + list(carve_sizes)}
            fp = fingerprint("carve", sent_fp["train"], carve_sizes, o["seed"])
            carve_stats = self.run_step(
                "carve", fp,
                lambda: text_mod.carve_splits(sent_path["train"], sent_stats["train"]["documents"],
                                              carve_sizes, o["seed"], outs),
                list(outs.values()))
            for s, p in outs.items():
                split_source[s] = (p, fp)
        splits = [s for s in SPLITS if s in split_source]
        if "valid" not in splits and self.needs_valid:
            self.warnings.append("no valid split (--valid-size 0 and no --valid): train with "
                                 "--disable-validation")

        # 4. sentencepiece, or the model's tokenizer
        if o["tokenizer_from"] is not None:
            model_path = self.path("tokenizer")
            spm_fp = fingerprint("tokenizer", tokenizer_identity(o["tokenizer_from"]))
            spm_stats = self.run_step("tokenizer", spm_fp,
                                      lambda: copy_tokenizer(o["tokenizer_from"], model_path),
                                      [model_path])
        else:
            model_path = self.path("sentencepiece.model")
            spm_fp = fingerprint("spm", split_source["train"][1], o["vocab_size"], o["model_type"],
                                 o["spm_sample_size"], o["seed"], o["character_coverage"],
                                 o["unk_token"], o["spm_threads"])
            spm_stats = self.run_step(
                "spm", spm_fp,
                lambda: encode_mod.train_sentencepiece(
                    split_source["train"][0], model_path, o["vocab_size"], o["model_type"],
                    o["spm_sample_size"], o["seed"], o["character_coverage"], o["unk_token"],
                    self.workers, self.work, o["spm_threads"]),
                [model_path])

        # 5. encode
        max_body = o["tokens_per_sample"] - 2
        enc_stats, enc_fp, enc_path = {}, {}, {}
        counts_path = self.path("train.counts.npy")
        direct = o["binarizer"] == "direct"
        for split in splits:
            out = self.path(f"{split}.ids" if direct else f"{split}.spm")
            fp = fingerprint("encode", split, split_source[split][1], spm_fp, max_body,
                             o["long_sentences"], o["unk_token"], *(["direct"] if direct else []))
            outputs = ([out + ".bin", out + ".idx"] if direct else [out]) + \
                ([counts_path] if split == "train" else [])
            enc_stats[split] = self.run_step(
                f"encode-{split}", fp,
                lambda split=split, out=out: self._encode(split, split_source[split][0], out,
                                                          model_path, max_body, counts_path),
                outputs)
            enc_fp[split], enc_path[split] = fp, out

        # 6. dict.txt
        dict_path = self.path("dict.txt")
        dict_fp = fingerprint("dict", enc_fp["train"])
        dict_stats = self.run_step("dict", dict_fp, lambda: self._dict(model_path, counts_path, dict_path),
                                   [dict_path])

        # 7. binarize (--only-vocab: the tokenizer and dict.txt alone)
        bin_fp = fingerprint("binarize", dict_fp, [enc_fp[s] for s in splits], self.only_vocab)
        bin_outputs = [os.path.join(self.data_bin, n) for n in ["dict.txt", vocabulary.RECORD] + (
            [] if self.only_vocab else [f"{s}.{e}" for s in splits for e in ("bin", "idx")])
            + tokenizer_file_names(model_path)
            + ([PUNKT_FILE] if self.only_vocab and os.path.isfile(self.path(PUNKT_FILE)) else [])]
        bin_stats = self.run_step(
            "binarize", bin_fp,
            lambda: self._binarize(dict_path, model_path, enc_path, enc_stats,
                                   [] if self.only_vocab else splits),
            bin_outputs, run_fingerprint=self.run_fingerprint())

        if o["remove_intermediate"]:
            self._remove_intermediate()

        summary = self._summary(punkt_stats, sent_stats, carve_stats, spm_stats, enc_stats,
                                dict_stats, bin_stats, splits, time.time() - start)
        if not any(st["status"] == "ran" for st in self.steps.values()):
            # every step was done earlier (by a run of other options that do not change the output, such
            # as another path to the same --tokenizer-from): the speed is the run's that did them
            try:
                earlier = read_json(self.summary_path, PrepareError) if os.path.isfile(self.summary_path) else None
            except PrepareError:  # damaged: this run's own figures then
                earlier = None
            if isinstance(earlier, dict) and earlier.get("rate") and "seconds" in earlier:
                summary.update(rate=earlier["rate"], seconds=earlier["seconds"])
        write_json(self.summary_path, summary)
        return summary

    # ---- steps -------------------------------------------------------------------
    def vocabulary_punkt(self) -> Optional[str]:
        """With --punkt auto, the sentence splitter of a --tokenizer-from that clear-prepare --only-vocab
        made (its punkt.json): every shard splits sentences as the others do, and as the vocabulary's sample."""
        path = os.path.join(self.opts["tokenizer_from"] or "", PUNKT_FILE)
        return path if self.opts["tokenizer_from"] and self.opts["punkt"] == "auto" and os.path.isfile(path) else None

    def _punkt(self, punkt_path, train_formats):
        o = self.opts
        params, stats = None, {}
        shared = self.vocabulary_punkt()
        if shared:
            try:
                with open(shared, encoding="utf-8") as f:
                    params = json.load(f)
                text_mod.punkt_params_from_json(params)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise PrepareError(f"--tokenizer-from: '{shared}' is not a sentence splitter clear-prepare "
                                   f"wrote ({type(e).__name__}: {e}); make the vocabulary again") from None
            stats = {"model": f"the vocabulary's ({shared})"}
        if params is None and o["punkt"] in ("auto", "pretrained"):
            params = text_mod.pretrained_punkt(o["punkt_language"])
            if params is None and o["punkt"] == "pretrained":
                raise PrepareError(
                    f"--punkt pretrained: nltk's punkt_tab model for '{o['punkt_language']}' is not "
                    "installed (python -m nltk.downloader punkt_tab, online); use --punkt train"
                )
            if params is not None:
                stats = {"model": f"pretrained punkt_tab ({o['punkt_language']})"}
        if params is None:
            files = self.files["train"]
            params, used = text_mod.train_punkt(files, train_formats, o["punkt_sample_chars"],
                                                {"wikitext_markers": o["wikitext_markers"]},
                                                o["progress"])
            stats = {"model": "trained unsupervised on the corpus (nltk PunktTrainer)",
                     "training_chars": used,
                     "note": "nltk's pretrained punkt_tab was not installed"
                     if o["punkt"] == "auto" else "--punkt train"}
        stats.update(abbreviations=len(params["abbrev_types"]),
                     collocations=len(params["collocations"]),
                     sentence_starters=len(params["sent_starters"]))
        write_json(punkt_path, params)
        return stats

    def _encode(self, split, sent_path, out, model_path, max_body, counts_path):
        import numpy as np

        encode_file = direct_binarize.encode_file if self.opts["binarizer"] == "direct" else encode_mod.encode_file
        stats, counts = encode_file(
            sent_path, out, model_path, max_body, self.opts["long_sentences"],
            self.opts["unk_token"], self.workers, self.opts["progress"], desc=f"encode ({split})")
        if split == "train":
            with atomic_write(counts_path, "wb") as f:
                np.save(f, counts)
        return stats

    def _dict(self, model_path, counts_path, dict_path):
        import numpy as np

        if os.path.isdir(model_path):
            shutil.copyfile(os.path.join(model_path, "dict.txt"), dict_path)
            with open(dict_path, encoding="utf-8") as f:
                entries = sum(1 for line in f if line.strip())
            return {"dict_entries": entries, "fairseq_dictionary_size": entries + 4,
                    "from": os.path.join(self.opts["tokenizer_from"], "dict.txt"),
                    "sha256": vocabulary.sha256(dict_path)}
        return encode_mod.write_dict(model_path, np.load(counts_path), dict_path)

    def _binarize(self, dict_path, model_path, enc_path, enc_stats, splits):
        # built beside data-bin, then only our own files there replaced (the user's stay), and a
        # split this run no longer writes removed: see export/output_dir.py. A damaged file of ours
        # (a reason for this step to run again) is remade.
        log_path = self.path("fairseq-preprocess.log")
        with staged_output(self.data_bin, writer=WRITER, option="OUT_DIR/data-bin", replace_changed=True,
                           remove_unwritten=True) as tmp:
            if self.opts["binarizer"] == "direct":
                direct_binarize.publish(dict_path, {s: enc_path[s] for s in splits}, tmp, enc_stats, log_path)
            else:
                expected = sum(enc_stats[s]["tokens"] + enc_stats[s]["lines"] for s in splits)
                binarize_mod.binarize(
                    dict_path, {s: enc_path[s] for s in splits}, tmp, self.workers, expected,
                    self.opts["progress"], log_path)
            tokenizer = write_tokenizer(model_path, tmp)
            vocabulary.write_record(tmp, tokenizer, os.path.join(tmp, "dict.txt"))
            if self.only_vocab and os.path.isfile(self.path(PUNKT_FILE)):  # the shards' sentence splitter
                shutil.copyfile(self.path(PUNKT_FILE), os.path.join(tmp, PUNKT_FILE))
            with open(dict_path, encoding="utf-8") as a, open(os.path.join(tmp, "dict.txt"), encoding="utf-8") as b:
                if a.read() != b.read():
                    raise PrepareError(f"fairseq-preprocess rewrote dict.txt differently from '{dict_path}'")
            checks = {}
            for s in splits:
                st = enc_stats[s]
                checks[s] = binarize_mod.check_binarized(tmp, s, st["lines"], st["tokens"], st["unk"])
        return {"checked": checks, "fairseq_preprocess_log": log_path}

    def _remove_intermediate(self):
        # only what the steps' markers say they wrote: other files in the folder are left alone
        written = set()
        for marker in sorted(os.listdir(self.markers.directory)):
            if marker.endswith(".json"):
                written.update(self.markers.outputs(self.markers.load(marker[:-len(".json")])))
        if self.markers.load("spm"):  # the spm step's sample beside its model (not an output it is judged by)
            written.add(self.path("spm_sample.txt"))
        for path in sorted(written):
            name = os.path.basename(path)
            if os.path.dirname(path) == self.work and os.path.isfile(path) and (
                    name.endswith((".sent", ".spm", ".ids.bin", ".ids.idx")) or name == "spm_sample.txt"):
                os.unlink(path)
        logger.info("removed intermediate text files from %s", self.work)

    # ---- summary -----------------------------------------------------------------
    def _summary(self, punkt_stats, sent_stats, carve_stats, spm_stats, enc_stats, dict_stats,
                 bin_stats, splits, seconds):
        total = LineReport()
        per_split_lines = {}
        for split in splits:
            rep = LineReport()
            if split in sent_stats:
                rep = LineReport(sent_stats[split]["lines"])
            e = enc_stats[split]
            rep.add("dropped", "empty_after_encoding", e["empty_after_encoding"])
            rep.add("altered", "long_sentence_split", e["long_sentences_split"])
            rep.add("altered", "long_sentence_truncated", e["long_sentences_truncated"])
            rep.add("altered", "very_long_word_cut_for_encoding", e["very_long_words_cut"])
            per_split_lines[split] = rep
        for split in sent_stats:
            total.update(LineReport(sent_stats[split]["lines"]))
        for split in splits:
            e = enc_stats[split]
            total.add("dropped", "empty_after_encoding", e["empty_after_encoding"])
            total.add("altered", "long_sentence_split", e["long_sentences_split"])
            total.add("altered", "long_sentence_truncated", e["long_sentences_truncated"])
            total.add("altered", "very_long_word_cut_for_encoding", e["very_long_words_cut"])

        split_summary = {}
        for split in splits:
            e = enc_stats[split]
            source = (f"inputs: {', '.join(self.files[split])}" if split in self.files
                      else f"carved from the training inputs (--{split}-size "
                      f"{self.opts[split + '_size']}, --seed {self.opts['seed']})")
            split_summary[split] = {
                "source": source,
                "documents": e["documents"],
                "sentences": e["sentences"],
                "tokens": e["tokens"],
                "unk_tokens": e["unk"],
                "unk_rate": round(e["unk"] / e["tokens"], 6) if e["tokens"] else 0.0,
                "unk_from_unk_token": e["unk_markers"],
                "long_sentences_split": e["long_sentences_split"],
                "extra_lines_from_splitting": e["extra_lines_from_splitting"],
                "long_sentences_truncated": e["long_sentences_truncated"],
                "tokens_truncated": e["tokens_truncated"],
                "lines": per_split_lines[split].to_dict(),
            }
            if split in sent_stats:
                split_summary[split]["input_lines"] = {
                    k: sent_stats[split]["input"][k] for k in ("files", "bytes", "lines", "blank_lines")}
        inputs = {s: sent_stats[s]["input"] for s in sent_stats}
        for s, st in inputs.items():
            for f in st["empty_files"]:
                self.warnings.append(f"{s} input '{f}' is empty")
            for f in st["blank_only_files"]:
                self.warnings.append(f"{s} input '{f}' holds only blank lines")
        return {
            "out_dir": self.out_dir,
            "data_bin": self.data_bin,
            "summary": self.summary_path,
            "train_with": f"fairseq-train {self.data_bin} --user-dir {shards_mod.user_dir()} --task clear "
                          f"--criterion clear --tokens-per-sample {self.opts['tokens_per_sample']} ...",
            "splits": split_summary,
            "lines": total.to_dict(),
            "documents_without_sentences": {s: sent_stats[s]["documents_without_sentences"]
                                            for s in sent_stats},
            "inputs": inputs,
            "sentence_splitter": punkt_stats or {"model": "none (--input-format lines)"},
            "sentencepiece": spm_stats,
            "dictionary": dict_stats,
            "binarized": bin_stats["checked"],
            "options": {k: v for k, v in self.opts.items() if k not in ("valid", "test")},
            "workers": self.workers,
            "rate": self._rate(sent_stats, enc_stats, splits, seconds),
            "steps": self.steps,
            "seconds": round(seconds, 2),
            "warnings": self.warnings,
        }


    def _rate(self, sent_stats, enc_stats, splits, seconds) -> Dict:
        """MB of raw text per second, end to end and per worker (what more cores multiply), and the
        encode step's (which binarizes too with --binarizer direct)."""
        mb = sum(st["input"]["bytes"] for st in sent_stats.values()) / 1e6
        return {"input_mb": round(mb, 3),
                "mb_per_s": round(mb / max(seconds, 1e-9), 3),
                "mb_per_s_per_worker": round(mb / max(seconds, 1e-9) / self.workers, 3),
                "encode_mb_per_s_per_worker": {s: enc_stats[s].get("mb_per_s_per_worker") for s in splits}}


def holds_text(path: str) -> bool:
    """Whether ``path`` has a character other than whitespace, Unicode's included (as clean_line and
    text_mod.is_blank see it), read until the first block that has one."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character cut between blocks is whole
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            if decoder.decode(block).strip():
                return True
    return bool(decoder.decode(b"", final=True).strip())


def check_tokenizer_dir(directory: str) -> None:
    """--tokenizer-from: a directory with dict.txt and a tokenizer that vocabulary.detect finds."""
    try:
        vocabulary.find(directory, "--tokenizer-from")
    except vocabulary.TokenizerError as e:
        raise PrepareError(str(e)) from None
    if not os.path.isfile(os.path.join(directory, "dict.txt")):
        raise PrepareError(f"--tokenizer-from: '{directory}' has no dict.txt (the model's dictionary)")


def tokenizer_identity(directory: str) -> Dict:
    """The tokenizer kind and the SHA-256 of its files and dict.txt (the step's fingerprint)."""
    return vocabulary.detect(directory).record(os.path.join(directory, "dict.txt"))


def copy_tokenizer(source: str, dest: str) -> Dict:
    """Copy the tokenizer files, dict.txt and a record of ``source`` into the directory ``dest``."""
    tok = vocabulary.detect(source)
    with atomic_path(dest) as tmp:
        os.makedirs(tmp)
        for path in list(tok.files.values()) + [os.path.join(source, "dict.txt")]:
            shutil.copyfile(path, os.path.join(tmp, os.path.basename(path)))
        for name in ("tokenizer_config.json", "special_tokens_map.json"):
            if os.path.isfile(os.path.join(source, name)):
                shutil.copyfile(os.path.join(source, name), os.path.join(tmp, name))
        copied = vocabulary.from_record(tmp, tok.record())
        vocabulary.write_record(tmp, copied, os.path.join(tmp, "dict.txt"))
        if os.path.exists(dest):
            shutil.rmtree(dest)  # an earlier run's copy (the work directory is ours)
    return {"tokenizer": tok.kind, "from": os.path.abspath(source),
            "files": sorted(os.path.basename(p) for p in tok.files.values())}


def tokenizer_file_names(model_path: str) -> List[str]:
    """The names of the tokenizer files :func:`write_tokenizer` puts beside the binarized data."""
    if not os.path.isdir(model_path):
        return ["sentencepiece.model"]
    return list(vocabulary.read_record(model_path)["files"].values()) + [
        n for n in ("tokenizer_config.json", "special_tokens_map.json") if os.path.isfile(os.path.join(model_path, n))]


def write_tokenizer(model_path: str, dest: str):
    """Put the tokenizer files beside the binarized data; returns the tokenizer there."""
    if os.path.isdir(model_path):
        for name in tokenizer_file_names(model_path):
            shutil.copyfile(os.path.join(model_path, name), os.path.join(dest, name))
        return vocabulary.from_record(dest, vocabulary.read_record(model_path))
    shutil.copyfile(model_path, os.path.join(dest, "sentencepiece.model"))
    return vocabulary.SentencepieceTokenizer(os.path.join(dest, "sentencepiece.model"))


def prepare(inputs: Sequence[str], out_dir: str, only_vocab: bool = False, sample_mb: Optional[float] = None,
            shards: Optional[int] = None, shard_ids: Optional[str] = None, **options) -> Dict:
    """Run the pipeline (options as the CLI's, with underscores); returns the summary dict.
    ``only_vocab``/``sample_mb``, ``shards``/``shard_ids``: see shards.py."""
    if only_vocab and shards is not None:
        raise PrepareError("--only-vocab makes the vocabulary that --shards runs use: run them one after the other")
    if sample_mb is not None and not only_vocab:
        raise PrepareError("--sample-mb is the sample of --only-vocab; without it every line is prepared")
    if shard_ids is not None and shards is None:
        raise PrepareError("--shard-ids names shards of --shards N: give --shards too")
    if shards is not None:
        return shards_mod.prepare_shards(Pipeline, inputs, out_dir, shards, shard_ids, defaults=DEFAULTS, **options)
    if only_vocab:
        return shards_mod.prepare_vocab(Pipeline, inputs, out_dir, sample_mb, **options)
    return Pipeline(inputs, out_dir, **options).run()


def format_summary(s: Dict) -> str:
    if "shards" in s:
        return shards_mod.format_shards_summary(s)
    lines = [f"data: {s['data_bin']}", ""]
    head = f"{'split':<6} {'documents':>10} {'sentences':>11} {'tokens':>13} {'<unk> rate':>10}"
    lines += [head, "-" * len(head)]
    for split, st in s["splits"].items():
        lines.append(f"{split:<6} {st['documents']:>10,} {st['sentences']:>11,} {st['tokens']:>13,} "
                     f"{100 * st['unk_rate']:>9.3f}%")
    lines.append("")
    for kind in ("dropped", "altered", "normalized"):
        reasons = s["lines"][kind]
        if reasons:
            lines.append(f"lines {kind}: " + ", ".join(f"{r} {n:,}" for r, n in reasons.items()))
        else:
            lines.append(f"lines {kind}: none")
    sp = s["sentencepiece"]
    lines.append(f"sentence splitter: {s['sentence_splitter']['model']}")
    if "tokenizer" in sp:
        lines.append(f"tokenizer: {sp['tokenizer']} from {sp['from']} (--tokenizer-from)")
        lines.append(f"dictionary: {s['dictionary']['fairseq_dictionary_size']:,} symbols "
                     f"(the model's dict.txt)")
    else:
        lines.append(f"sentencepiece: {sp['model_type']}, {sp['vocab_size']:,} pieces "
                     f"(asked {sp['vocab_size_requested']:,}), trained on {sp['sample_sentences']:,} sentences")
        lines.append(f"dictionary: {s['dictionary']['fairseq_dictionary_size']:,} symbols "
                     f"(fairseq id = sentencepiece id + 1)")
    ran = [n for n, st in s["steps"].items() if st["status"] == "ran"]
    skipped = [n for n, st in s["steps"].items() if st["status"] != "ran"]
    lines.append(f"steps run: {', '.join(ran) or 'none'}; skipped (done earlier): "
                 f"{', '.join(skipped) or 'none'}; {s['seconds']:.1f} s")
    for w in s["warnings"]:
        lines.append(f"WARNING: {w}")
    rate = s.get("rate")
    if rate:
        lines.append(f"rate: {rate['input_mb']:,.1f} MB of text, {rate['mb_per_s']:.2f} MB/s end to end, "
                     f"{rate['mb_per_s_per_worker']:.2f} MB/s per worker ({s['workers']} workers)")
    lines.append(f"summary: {s.get('summary', os.path.join(s['out_dir'], 'summary.json'))}")
    return "\n".join(lines)
