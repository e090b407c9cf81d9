"""Writing sentences with one blank line between documents, in parallel chunks.

Workers turn a chunk of input into a stream of events: :data:`BREAK` (a document
ends), :data:`START` (a document begins, e.g. a WikiText title, even if no sentence
follows) and lists of sentences (content; an empty list is content whose lines were
all dropped). :func:`render` turns a chunk's events into text *in the worker*, and
:class:`DocumentMerger` joins the rendered chunks in the main process with work per
chunk, not per line, so the main process does not limit how far the workers scale.

The output never has a blank line first, last or twice in a row, and a document
that began but got no sentence is counted (``empty_documents``), not written.

A chunk cannot know whether the document it starts in already has sentences, so
:func:`render` splits it at its first BREAK: the *head* continues the incoming
document; the *tail* is rendered completely, from a fresh state.
"""

from typing import List, NamedTuple, Optional

BREAK = None
START = True


class Tail(NamedTuple):
    text: str  # sentences, a blank line between documents; no blank line first or last
    sentences: int
    documents: int  # documents with sentences completed inside the tail
    empty_documents: int
    open_doc: bool  # state at the end of the chunk
    has_sentences: bool
    pending_break: bool  # a document with sentences ended after the last sentence


class Rendered(NamedTuple):
    head_content: bool
    head_text: str
    head_sentences: int
    tail: Optional[Tail]


def _join(lines: List[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def render(events, join=_join, blank="") -> Rendered:
    """``join``/``blank``: how lines and the blank line between documents are written (text; the
    direct binarizer passes ids)."""
    head: List[str] = []
    head_content = False
    it = iter(events)
    for ev in it:
        if ev is BREAK:
            break
        head_content = True
        if ev is not START:
            head.extend(ev)
    else:
        return Rendered(head_content, join(head), len(head), None)

    out: List[str] = []
    docs = empty = n = 0
    open_doc = pending = False
    doc_sents = 0
    for ev in it:
        if ev is BREAK:
            if doc_sents:
                docs += 1
                pending = True
            elif open_doc:
                empty += 1
            open_doc, doc_sents = False, 0
        elif ev is START:
            open_doc = True
        else:
            open_doc = True
            if ev:
                if pending:
                    out.append(blank)
                    pending = False
                out.extend(ev)
                doc_sents += len(ev)
                n += len(ev)
    return Rendered(head_content, join(head), len(head),
                    Tail(join(out), n, docs, empty, open_doc, doc_sents > 0, pending))


class DocumentMerger:
    """Joins rendered chunks, in order, into one file (``out``: a text file object, or anything
    whose ``write`` takes what :func:`render`'s ``join`` made and ``blank``, the blank line)."""

    def __init__(self, out, blank="\n"):
        self.out, self.blank = out, blank
        self.open_doc = self.has_sentences = self.pending = False
        self.documents = self.empty_documents = self.sentences = 0

    def _write(self, text: str):
        if self.pending:
            self.out.write(self.blank)
            self.pending = False
        self.out.write(text)

    def doc_break(self):
        if self.has_sentences:
            self.documents += 1
            self.pending = True
        elif self.open_doc:
            self.empty_documents += 1
        self.open_doc = self.has_sentences = False

    def add(self, r: Rendered):
        if r.head_content:
            self.open_doc = True
        if r.head_sentences:
            self._write(r.head_text)
            self.has_sentences = True
            self.sentences += r.head_sentences
        if r.tail is None:
            return
        self.doc_break()
        t = r.tail
        if t.sentences:
            self._write(t.text)
            self.sentences += t.sentences
            self.pending = t.pending_break
        self.documents += t.documents
        self.empty_documents += t.empty_documents
        self.open_doc, self.has_sentences = t.open_doc, t.has_sentences

    def finish(self):
        self.doc_break()
        self.pending = False
