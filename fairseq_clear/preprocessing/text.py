"""Raw text → one sentence per line, documents separated by a blank line.

Input formats (``--input-format``):

* ``text``: paragraphs, one per line; Punkt splits them into sentences.
  Documents are delimited as ``--documents`` says (blank lines by default).
* ``lines``: already one sentence per line (e.g. SimCSE's wiki1m, the WordNet
  demo corpus); lines are cleaned but not split.
* ``wikitext``: WikiText-2/-103 ``.tokens``/``.raw``. A ``= Title =`` line
  after a blank line starts a document (the title is not a sentence and is
  dropped, counted; in a file without blank lines every such line counts);
  ``= = Section = =`` headings are dropped (``--wikitext-headings keep`` keeps
  their text as a sentence); blank lines are paragraph breaks. WikiText's
  ``@-@``, ``@,@`` and ``@.@`` markers are joined (``role @-@ playing`` →
  ``role-playing``, ``1 @,@ 000`` → ``1,000``) unless ``--wikitext-markers
  keep``; its other tokenisation (spaces around punctuation) is kept.
  ``<unk>`` stays in the text here; the encoder maps it to the dictionary's
  ``<unk>`` (``--unk-token``).
* ``auto``: ``wikitext`` for files named ``*.tokens``/``*.raw`` (also
  ``*.tokens.*``) or whose first non-blank line is `` = Title = ``, else ``text``.

Every file ends a document. Cleaning of each line (counted per reason): CR of
CRLF endings removed, NUL bytes removed, invalid UTF-8 replaced by U+FFFD or the
line dropped (``--invalid-utf8``), other control characters turned into spaces;
runs of whitespace become one space (sentencepiece does the same).

The main process only cuts the files into blocks of about 1 MB at line ends;
workers classify, clean and split the lines and render their block's output
(:mod:`.documents`), which the main process joins in order. Blocks are read
ahead by a bounded amount, so memory does not grow with the corpus.
"""

import itertools
import logging
import os
import re
import string
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..atomic_files import atomic_write
from .common import LineReport, PrepareError, ordered_parallel_map, progress
from .documents import BREAK as DOC_BREAK
from .documents import START as DOC_START
from .documents import DocumentMerger, render

logger = logging.getLogger(__name__)

INPUT_FORMATS = ("auto", "text", "lines", "wikitext")
DOCUMENT_MODES = ("blank-lines", "files", "lines")

CHUNK_BYTES = 1 << 20
#: Paragraphs longer than this are cut (at a sentence-like boundary if possible)
#: before Punkt: nltk runs its regular expressions under a 5 s wall-clock limit,
#: which a multi-megabyte paragraph exceeds.
PUNKT_MAX_CHARS = 20_000

_BOM = b"\xef\xbb\xbf"
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_WIKITEXT_MARKER = re.compile(r" @([-,.])@ ")
_WIKITEXT_NAME = re.compile(r"\.(tokens|raw)(\.|$)")


def _wikitext_kind(stripped: bytes) -> Optional[str]:
    """'title' for ``= Title =``, 'heading' for ``= = Section = =`` (and deeper), else None."""
    if len(stripped) < 4 or not (stripped.startswith(b"= ") and stripped.endswith(b" =")):
        return None
    return "heading" if stripped.startswith(b"= =") else "title"


def detect_format(path: str) -> str:
    if _WIKITEXT_NAME.search(os.path.basename(path)):
        return "wikitext"
    with open(path, "rb") as f:
        for _ in range(20):
            line = f.readline(65536)
            if not line:
                break
            if line.strip():
                return "wikitext" if _wikitext_kind(line.strip()) == "title" else "text"
    return "text"


# ---- reading ---------------------------------------------------------------------------

def read_blocks(path: str, block_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Blocks of about ``block_bytes`` that end at a line end (a longer line is one block)."""
    with open(path, "rb") as f:
        while True:
            block = f.read(block_bytes)
            if not block:
                return
            if not block.endswith(b"\n"):
                block += f.readline()
            yield block


def block_spans(path: str, block_bytes: int = CHUNK_BYTES) -> Iterator[Tuple[int, int]]:
    """(start, end) of the blocks :func:`read_blocks` reads, found without reading them."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        start = 0
        while start < size:
            end = min(start + block_bytes, size)
            if end < size:
                f.seek(end - 1)
                if f.read(1) != b"\n":
                    end += len(f.readline())
            yield start, end
            start = end


def split_block_lines(block: bytes) -> List[bytes]:
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    return lines


#: the characters other than ASCII's that str.isspace (so clean_line's str.split) takes for whitespace,
#: besides \n (test_a_line_of_unicode_whitespace_is_a_blank_line_and_ends_a_document, in
#: tests/reliability/test_preprocess_bad_input.py, derives them from Python's own tables)
UNICODE_SPACES = ("\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                  "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_SPACE = rb"[ \t\r\x0b\x0c]|" + b"|".join(re.escape(c.encode("utf-8")) for c in UNICODE_SPACES)
#: the first bytes of the UTF-8 of UNICODE_SPACES: only a line that starts with one can be blank
#: without being blank to bytes.strip
_OTHER_SPACE_LEADS = frozenset(c.encode("utf-8")[0] for c in UNICODE_SPACES)
#: a line of whitespace only, Unicode's included: blank (scraped HTML's &nbsp; paragraphs end a document)
_BLANK_LINE = re.compile(rb"(?m)^(?:" + _SPACE + rb")*$")
_WHITESPACE_ONLY = re.compile(rb"(?:" + _SPACE + rb")*")


def is_blank(line: bytes) -> bool:
    """Whether a line (bytes, without its \n) holds whitespace only, NBSP, U+3000 and the other
    characters of :data:`UNICODE_SPACES` included: what clean_line would leave nothing of."""
    return not line.strip() or _WHITESPACE_ONLY.fullmatch(line) is not None


class BlockState(NamedTuple):
    """What a worker must know about the lines before its block (WikiText titles)."""

    file_start: bool
    prev_blank: bool
    seen_blank: bool

    def after(self, block: bytes) -> "BlockState":
        body = block[:-1] if block.endswith(b"\n") else block
        last = body.rsplit(b"\n", 1)[-1]
        return BlockState(False, is_blank(last), self.seen_blank or _BLANK_LINE.search(body) is not None)


class LineClassifier:
    """Turns raw lines into document events and content lines (cheap byte checks).

    WikiText titles and headings stand between blank lines; lines such as
    " = Position ; GP = " inside a paragraph are text. A file without blank lines
    (the CRLF wiki.test.raw copy) gives no such context: every "= X =" line counts.
    """

    def __init__(self, fmt: str, documents: str, headings: str, state: BlockState,
                 report: LineReport):
        self.fmt, self.documents, self.headings = fmt, documents, headings
        self.first = state.file_start
        self.prev_blank, self.seen_blank = state.prev_blank, state.seen_blank
        self.report = report
        self.lines = self.blank_lines = self.content_lines = 0

    def classify(self, line: bytes) -> Iterator:
        """Yield DOC_BREAK / DOC_START / content bytes for one raw line (without its \\n)."""
        self.lines += 1
        if line.endswith(b"\r"):
            line = line[:-1]
            self.report.add("normalized", "crlf_line_ending")
        if self.first:
            self.first = False
            if line.startswith(_BOM):
                line = line[len(_BOM):]
                self.report.add("normalized", "utf8_byte_order_mark")
        stripped = line.strip()
        if stripped and stripped[0] in _OTHER_SPACE_LEADS and is_blank(stripped):
            self.report.add("normalized", "unicode_whitespace_line_as_blank_line")
            stripped = b""
        after_blank = self.prev_blank or not self.seen_blank
        self.prev_blank = not stripped
        if not stripped:
            self.seen_blank = True
            self.blank_lines += 1
            if self.fmt != "wikitext" and self.documents == "blank-lines":
                yield DOC_BREAK
            return
        self.content_lines += 1
        if self.fmt == "wikitext":
            kind = _wikitext_kind(stripped) if after_blank else None
            if kind == "title":
                self.report.add("dropped", "wikitext_title_line")
                yield DOC_BREAK
                yield DOC_START
                return
            if kind == "heading":
                if self.headings == "drop":
                    self.report.add("dropped", "wikitext_heading_line")
                    return
                self.report.add("altered", "wikitext_heading_kept_without_=")
                line = stripped.strip(b"= ")
        yield line
        if self.fmt != "wikitext" and self.documents == "lines":
            yield DOC_BREAK


class InputStats:
    """What was read from the input files of one split."""

    def __init__(self):
        self.files = []  # {"path", "format", "bytes", "lines", "blank_lines", "content_lines"}
        self.empty_files = []
        self.blank_only_files = []

    def to_dict(self):
        return {
            "files": len(self.files),
            "bytes": sum(f["bytes"] for f in self.files),
            "lines": sum(f["lines"] for f in self.files),
            "blank_lines": sum(f["blank_lines"] for f in self.files),
            "formats": sorted({f["format"] for f in self.files}),
            "empty_files": self.empty_files,
            "blank_only_files": self.blank_only_files,
            "per_file": self.files,
        }


# ---- cleaning and splitting (workers) ------------------------------------------------

def clean_line(raw: bytes, fmt: str, invalid_utf8: str, wikitext_markers: str,
               report: LineReport) -> Optional[str]:
    """Cleaned text of one content line, or None if it is dropped (counted in ``report``)."""
    if b"\x00" in raw:
        raw = raw.replace(b"\x00", b"")
        report.add("altered", "nul_bytes_removed")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if invalid_utf8 == "drop":
            report.add("dropped", "invalid_utf8")
            return None
        text = raw.decode("utf-8", errors="replace")
        report.add("altered", "invalid_utf8_replaced")
    if _CONTROL.search(text):
        text = _CONTROL.sub(" ", text)
        report.add("altered", "control_characters_to_space")
    text = " ".join(text.split())  # runs of whitespace (str.isspace, what re's \s matches) -> one space, ends stripped
    if fmt == "wikitext" and wikitext_markers == "join" and "@" in text:
        joined = _WIKITEXT_MARKER.sub(r"\1", text)
        if joined != text:
            report.add("altered", "wikitext_@_markers_joined")
            text = joined
    if not text:
        report.add("dropped", "empty_after_cleaning")
        return None
    return text


def cut_text(text: str, max_chars: int) -> List[str]:
    """Cut ``text`` into pieces of at most ``max_chars``: after '. ', '? ' or '! ' in the
    second half of a window if there is one, else at a space, else anywhere."""
    pieces, pos, n = [], 0, len(text)
    while n - pos > max_chars:
        window = text[pos:pos + max_chars]
        cut = max(window.rfind(". "), window.rfind("? "), window.rfind("! "))
        if cut >= max_chars // 2:
            cut += 1
        else:
            cut = window.rfind(" ")
            if cut < max_chars // 2:
                cut = max_chars
        pieces.append(text[pos:pos + cut])
        pos += cut
    pieces.append(text[pos:])
    return [p.strip() for p in pieces if p.strip()]


#: Punkt's candidate sentence ends (``PunktLanguageVars.sent_end_chars``): a text without any is
#: one sentence, its stripped self, without running Punkt (tests/reliability/test_prepare_at_scale.py)
SENT_END_CHARS = re.compile(r"[.?!]")
#: decisions of :meth:`_MemoPunkt.text_contains_sentbreak` kept per worker (then forgotten, all at once)
PUNKT_MEMO_SIZE = 1 << 16  # some 10 MB of short strings


def _memo_token_class():
    """nltk's ``PunktToken`` whose regular-expression facts about a token's text (its type, and
    whether it is an ellipsis, an initial, alphabetic, not punctuation) are computed once per
    distinct text and remembered (up to :data:`PUNKT_MEMO_SIZE` texts, then forgotten at once):
    each is a function of the text alone, so every value is the one nltk computes. Most of Punkt's
    training time and much of its splitting is these few expressions run on the same words again."""
    from nltk.tokenize.punkt import PunktToken

    facts = {}  # text -> (type, ellipsis match, initial match, alpha match, non-punct match)
    base = PunktToken

    def lookup(tok):
        found = facts.get(tok)
        if found is None:
            if len(facts) >= PUNKT_MEMO_SIZE:
                facts.clear()
            typ = base._RE_NUMERIC.sub("##number##", tok.lower())  # PunktToken._get_type
            found = facts[tok] = (typ, base._RE_ELLIPSIS.match(tok), base._RE_INITIAL.match(tok),
                                  base._RE_ALPHA.match(tok), _punkt_non_punct().search(typ))
        return found

    class _MemoToken(PunktToken):
        __slots__ = ()

        def __init__(self, tok, **params):  # PunktToken.__init__, with the type looked up
            self.tok = tok
            self.type = lookup(tok)[0]
            self.period_final = tok.endswith(".")
            self.parastart = self.linestart = self.sentbreak = self.abbr = self.ellipsis = None
            for k in params:
                setattr(self, k, params[k])

        def _get_type(self, tok):
            return lookup(tok)[0]

        is_ellipsis = property(lambda self: lookup(self.tok)[1])
        is_initial = property(lambda self: lookup(self.tok)[2])
        is_alpha = property(lambda self: lookup(self.tok)[3])
        is_non_punct = property(lambda self: lookup(self.tok)[4])  # of the type, which is the text's

    return _MemoToken


def _punkt_non_punct():
    from nltk.tokenize import punkt

    return punkt._re_non_punct


def punkt_trainer():
    """nltk's ``PunktTrainer`` (all collocations, as :func:`train_punkt` trains) with the remembered
    token facts of :func:`_memo_token_class`: the same parameters, sooner."""
    from nltk.tokenize.punkt import PunktTrainer

    trainer = PunktTrainer(token_cls=_memo_token_class())
    trainer.INCLUDE_ALL_COLLOCS = True
    return trainer


#: whitespace other than ' ' that nltk's _get_last_whitespace_index looks for (string.whitespace)
_OTHER_WHITESPACE = re.compile("[\t\n\r\x0b\x0c]")


def _timed_finditer(pattern):
    """``pattern.finditer`` for one of nltk's patterns: a pattern nltk wraps in its time limit
    (``nltk.redos``) is run by the regex module directly, under that limit (a TimeoutError past it,
    as nltk's own), without the wrapper's generator around each match; a plain pattern as it is."""
    raw = getattr(pattern, "_rx", None)
    if raw is None:
        return pattern.finditer
    from nltk import redos

    timeout = getattr(pattern, "_timeout", getattr(redos, "_UNSET", None))
    if timeout is getattr(redos, "_UNSET", None):
        timeout = redos.DEFAULT_TIMEOUT
    return lambda text: raw.finditer(text, timeout=timeout)


def _memo_punkt(params):
    """nltk's ``PunktSentenceTokenizer`` whose decision on each candidate's context (the few words
    around a '.', '?' or '!': ``text_contains_sentbreak``, most of Punkt's time) is remembered: it
    depends on that text and the parameters only, and contexts recur (WikiText's " . The" above
    all), so the sentences are Punkt's exactly, with fewer of its decisions made."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    class _MemoPunkt(PunktSentenceTokenizer):
        def text_contains_sentbreak(self, text: str) -> bool:
            found = self.memo.get(text)
            if found is None:
                if len(self.memo) >= PUNKT_MEMO_SIZE:
                    self.memo.clear()
                found = self.memo[text] = super().text_contains_sentbreak(text)
            return found

        def tokenize(self, text: str, realign_boundaries: bool = True) -> List[str]:
            if not realign_boundaries:
                return super().tokenize(text, realign_boundaries)
            return [text[s] for s in self._realign_boundaries(text, self._slices_from_text(text))]

        def _slices_from_text(self, text: str) -> List[slice]:
            # nltk's _match_potential_end_contexts and _slices_from_text in one loop, over its
            # pattern's matches (nltk's, under nltk's time limit, without the wrapping generator):
            # each candidate's word starts after the last whitespace between the previous
            # candidate and it (nltk's _get_last_whitespace_index, as rfind in place); a candidate
            # whose word overlaps the next one's is not decided, as in nltk
            finditer = self.finditer
            others = _OTHER_WHITESPACE.search(text) is not None
            memo, sentbreak, rfind = self.memo, self.text_contains_sentbreak, text.rfind
            slices, last_break = [], 0
            prev, prev_start, prev_stop = None, 0, 0
            for match in itertools.chain(finditer(text), (None,)):
                if match is not None:
                    stop = match.start()
                    if others:
                        found = max(rfind(c, prev_stop, stop) for c in string.whitespace)
                    else:
                        found = rfind(" ", prev_stop, stop)
                    start = found + 1 if found > prev_stop else prev_start
                    if prev is None or prev_stop > start:
                        prev, prev_start, prev_stop = match, start, stop
                        continue
                elif prev is None:
                    break
                context = text[prev_start:prev_stop] + prev.group() + prev.group("after_tok")
                decided = memo.get(context)
                if decided if decided is not None else sentbreak(context):
                    slices.append(slice(last_break, prev.end()))
                    last_break = prev.start("next_tok") if prev.group("next_tok") else prev.end()
                if match is not None:
                    prev, prev_start, prev_stop = match, start, stop
            slices.append(slice(last_break, len(text.rstrip())))
            return slices

        def _realign_boundaries(self, text, slices):
            # nltk's, matching in place (pos, endpos) instead of on a copy of the rest of the text
            # per sentence, which made a paragraph's realignment quadratic in its length
            pattern = self._lang_vars.re_boundary_realignment
            match = getattr(pattern, "_rx", pattern).match  # nltk's pattern (regex), without the timer
            out, realign = [], 0
            slices = list(slices)
            for k, sentence1 in enumerate(slices):
                sentence1 = slice(sentence1.start + realign, sentence1.stop)
                if k + 1 == len(slices):
                    if text[sentence1]:
                        out.append(sentence1)
                    continue
                sentence2 = slices[k + 1]
                m = match(text, sentence2.start, sentence2.stop)
                if m:
                    out.append(slice(sentence1.start, sentence2.start + len(m.group(0).rstrip())))
                    realign = m.end() - sentence2.start
                else:
                    realign = 0
                    if text[sentence1]:
                        out.append(sentence1)
            return out

    tokenizer = _MemoPunkt(params, token_cls=_memo_token_class())
    tokenizer.memo = {}
    tokenizer.finditer = _timed_finditer(tokenizer._lang_vars.period_context_re())
    return tokenizer


class SentenceSplitter:
    """Punkt with a guard for very long paragraphs (see :data:`PUNKT_MAX_CHARS`)."""

    def __init__(self, params_json: Dict):
        self.tokenizer = _memo_punkt(punkt_params_from_json(params_json))

    def split(self, text: str, report: LineReport) -> List[str]:
        if len(text) > PUNKT_MAX_CHARS:
            report.add("altered", "long_paragraph_cut_before_sentence_splitting")
            segments = cut_text(text, PUNKT_MAX_CHARS)
        else:
            segments = [text]
        out = []
        for seg in segments:
            if not SENT_END_CHARS.search(seg):  # what Punkt returns for it: one sentence
                out.extend([seg.strip()] if seg.strip() else [])
                continue
            try:
                sents = self.tokenizer.tokenize(seg)
            except TimeoutError:
                # nltk's regex time limit: a loaded machine or a pathological line
                report.add("altered", "sentence_splitter_timeout_fallback_cut")
                sents = []
                for small in cut_text(seg, 1000):
                    try:
                        sents.extend(self.tokenizer.tokenize(small))
                    except TimeoutError:
                        sents.append(small)
            out.extend(s.strip() for s in sents if s.strip())
        return out


_WORKER = {}


def _init_worker(options: Dict, punkt_params: Optional[Dict]):
    _WORKER.clear()
    _WORKER.update(options)
    _WORKER["splitter"] = SentenceSplitter(punkt_params) if punkt_params else None


def process_block(job):
    """Worker: a block of raw lines → (rendered sentences, line counts, LineReport dict)."""
    index, block, fmt, state = job
    w = _WORKER
    report = LineReport()
    classifier = LineClassifier(fmt, w["documents"], w["wikitext_headings"], state, report)
    splitter = w["splitter"]
    events = []
    for line in split_block_lines(block):
        for ev in classifier.classify(line):
            if not isinstance(ev, bytes):
                events.append(ev)
                continue
            text = clean_line(ev, fmt, w["invalid_utf8"], w["wikitext_markers"], report)
            if text is None:
                sents = []
            elif fmt == "lines" or splitter is None:
                sents = [text]
            else:
                sents = splitter.split(text, report)
            events.append(sents)
    counts = {"lines": classifier.lines, "blank_lines": classifier.blank_lines,
              "content_lines": classifier.content_lines}
    return index, render(events), counts, report.to_dict()


# ---- Punkt model ---------------------------------------------------------------------

def punkt_params_to_json(params) -> Dict:
    return {
        "abbrev_types": sorted(params.abbrev_types),
        "collocations": sorted([list(c) for c in params.collocations]),
        "sent_starters": sorted(params.sent_starters),
        "ortho_context": dict(sorted(params.ortho_context.items())),
    }


def punkt_params_from_json(data: Dict):
    from nltk.tokenize.punkt import PunktParameters

    params = PunktParameters()
    params.abbrev_types = set(data["abbrev_types"])
    params.collocations = {tuple(c) for c in data["collocations"]}
    params.sent_starters = set(data["sent_starters"])
    for word, flags in data["ortho_context"].items():
        params.ortho_context[word] = int(flags)
    return params


def pretrained_punkt_installed(language: str = "english") -> bool:
    import nltk

    try:
        nltk.data.find(f"tokenizers/punkt_tab/{language}/")
        return True
    except LookupError:
        return False


def pretrained_punkt(language: str = "english") -> Optional[Dict]:
    """nltk's pretrained Punkt (``punkt_tab``) if installed, else None."""
    try:
        from nltk.tokenize.punkt import PunktTokenizer

        tok = PunktTokenizer(language)
    except (LookupError, OSError, ImportError, ValueError):
        return None
    return punkt_params_to_json(tok._params)


def punkt_training_text(files: List[str], formats: List[str], sample_chars: int, options: Dict):
    """Cleaned paragraphs from the start of each file, about ``sample_chars`` in all."""
    per_file = max(sample_chars // max(len(files), 1), 20_000)
    total = 0
    report = LineReport()
    for path, fmt in zip(files, formats):
        taken = 0
        state = BlockState(True, True, False)
        for block in read_blocks(path):
            classifier = LineClassifier(fmt, "blank-lines", "drop", state, report)
            state = state.after(block)
            for line in split_block_lines(block):
                for ev in classifier.classify(line):
                    if not isinstance(ev, bytes):
                        continue
                    text = clean_line(ev, fmt, "replace", options["wikitext_markers"], report)
                    if text is None:
                        continue
                    for piece in cut_text(text, PUNKT_MAX_CHARS):
                        yield piece
                        taken += len(piece)
                        total += len(piece)
                        if taken >= per_file or total >= sample_chars:
                            break
                if taken >= per_file or total >= sample_chars:
                    break
            if taken >= per_file or total >= sample_chars:
                break
        if total >= sample_chars:
            return


def train_punkt(files: List[str], formats: List[str], sample_chars: int, options: Dict,
                enabled_progress: bool = True):
    """Train Punkt unsupervised on a sample of the corpus; returns (params JSON, chars used)."""
    trainer = punkt_trainer()
    used = 0
    buf, size = [], 0
    with progress(total=sample_chars, desc="punkt: train", unit="B", enabled=enabled_progress) as bar:
        # fed in ~200 kB pieces: nltk's regexes run under a wall-clock limit
        for piece in punkt_training_text(files, formats, sample_chars, options):
            buf.append(piece)
            size += len(piece) + 1
            if size >= 200_000:
                trainer.train("\n".join(buf), finalize=False)
                bar.update(size)
                used += size
                buf, size = [], 0
        if buf:
            trainer.train("\n".join(buf), finalize=False)
            bar.update(size)
            used += size
    trainer.finalize_training()
    return punkt_params_to_json(trainer.get_params()), used


# ---- the step ------------------------------------------------------------------------

def split_files(files: List[str], out_path: str, options: Dict, punkt_params: Optional[Dict],
                workers: int, enabled_progress: bool = True, desc: str = "sentences",
                block_bytes: int = CHUNK_BYTES) -> Dict:
    """Write one sentence per line, a blank line between documents, to ``out_path``.

    Returns statistics: documents, sentences, documents without any sentence,
    lines dropped/altered/normalised by reason, and what was read.
    """
    report, stats = LineReport(), InputStats()
    formats = [options["formats"][f] for f in files]
    total = sum(os.path.getsize(f) for f in files)
    for path, fmt in zip(files, formats):
        stats.files.append({"path": path, "format": fmt, "bytes": os.path.getsize(path),
                            "lines": 0, "blank_lines": 0, "content_lines": 0})

    with progress(total=total, desc=desc, enabled=enabled_progress) as bar:

        def jobs():
            # the main process only cuts blocks; workers classify, clean, split and render
            for index, (path, fmt) in enumerate(zip(files, formats)):
                state = BlockState(True, True, False)
                for block in read_blocks(path, block_bytes):
                    yield index, block, fmt, state
                    state = state.after(block)
                    bar.update(len(block))
                yield index, b"", fmt, None  # end of file: ends a document

        worker_options = {k: options[k] for k in
                          ("invalid_utf8", "wikitext_markers", "documents", "wikitext_headings")}
        with atomic_write(out_path) as out:
            merger = DocumentMerger(out)
            for index, rendered, counts, chunk_report in ordered_parallel_map(
                _process_or_end, jobs(), workers, _init_worker, (worker_options, punkt_params)
            ):
                if rendered is None:
                    merger.doc_break()
                    continue
                merger.add(rendered)
                report.update(LineReport(chunk_report))
                for k, v in counts.items():
                    stats.files[index][k] += v
            merger.finish()
    for info in stats.files:
        if info["bytes"] == 0:
            stats.empty_files.append(info["path"])
            logger.warning("input file '%s' is empty", info["path"])
        elif info["content_lines"] == 0:
            stats.blank_only_files.append(info["path"])
            logger.warning("input file '%s' holds only blank lines", info["path"])
    if merger.empty_documents:
        report.add("dropped", "documents_without_sentences", merger.empty_documents)
    return {
        "documents": merger.documents,
        "sentences": merger.sentences,
        "documents_without_sentences": merger.empty_documents,
        "lines": report.to_dict(),
        "input": stats.to_dict(),
    }


def _process_or_end(job):
    if job[3] is None:
        return job[0], None, None, None
    return process_block(job)


def iter_documents(path: str) -> Iterator[List[str]]:
    """Documents (lists of sentences) of a sentence file written by :func:`split_files`."""
    doc = []
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                doc.append(line)
            elif doc:
                yield doc
                doc = []
    if doc:
        yield doc


def _empty_lines(block: bytes) -> List[int]:
    """Where the empty lines of a block that starts at a line start are."""
    found = [0] if block.startswith(b"\n") else []
    at = block.find(b"\n\n")
    while at >= 0:
        found.append(at + 1)
        at = block.find(b"\n\n", at + 1)
    return found


def carve_splits(all_path: str, n_docs: int, sizes: Dict[str, float], seed: int,
                 out_paths: Dict[str, str], block_bytes: int = CHUNK_BYTES) -> Dict:
    """Move randomly chosen whole documents of ``all_path`` into valid/test files.

    ``sizes``: split → a fraction (< 1) of the documents or a number of documents.
    Only the chosen document indices are held in memory. The file is copied in blocks, a document's
    bytes at a time (not a line at a time): the documents :func:`iter_documents` reads, each split's
    joined by one blank line.
    """
    import random

    want = {}
    for split, size in sizes.items():
        if size <= 0:
            continue
        k = int(round(size * n_docs)) if size < 1 else int(size)
        want[split] = max(k, 1)
    if sum(want.values()) >= n_docs:
        raise PrepareError(
            f"cannot carve {', '.join(f'{s} ({k} documents)' for s, k in want.items())} out of "
            f"{n_docs} training document(s) and keep any for training: pass --valid/--test files, "
            f"smaller --valid-size/--test-size, or --documents lines for a corpus of "
            f"unrelated sentences"
        )
    rng = random.Random(seed)
    chosen = rng.sample(range(n_docs), sum(want.values()))
    owner, pos = {}, 0
    for split, k in want.items():
        for i in chosen[pos:pos + k]:
            owner[i] = split
        pos += k
    counts = {s: {"documents": 0, "sentences": 0} for s in ["train"] + list(want)}
    from contextlib import ExitStack

    with ExitStack() as stack:
        outs = {s: stack.enter_context(atomic_write(out_paths[s], "wb")) for s in counts}
        doc, started = 0, False  # the document the next bytes belong to; whether it has any yet
        for block in read_blocks(all_path, block_bytes):
            if not block.endswith(b"\n"):  # the file's last line, without its end
                block += b"\n"
            view, pos = memoryview(block), 0
            for end in _empty_lines(block) + [len(block)]:
                if end > pos:  # lines of document ``doc``
                    split = owner.get(doc, "train")
                    c = counts[split]
                    if not started:
                        if c["documents"]:
                            outs[split].write(b"\n")
                        c["documents"] += 1
                        started = True
                    outs[split].write(view[pos:end])
                    c["sentences"] += block.count(b"\n", pos, end)
                if end < len(block) and started:  # a blank line ends the document
                    doc, started = doc + 1, False
                pos = end + 1
    return counts
