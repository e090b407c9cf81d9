"""The package's error base class.

Every error that a user's option, input or file causes derives from :class:`FairseqClearError`
(and from the built-in class it always was, so ``except ValueError`` keeps working). Its
message names the option or file; the command-line tools print it as one ``error:`` line
(``cli.command``). Kept free of imports: anything may raise it.
"""


class FairseqClearError(Exception):
    """An option, input or file that fairseq-clear cannot use; the message names it."""


class ExportError(FairseqClearError, ValueError):
    """The checkpoint cannot be represented exactly as an XLM-R model; the message says why.

    Here, not in export/, because the tokenizers' Hugging Face builders (hf_tokenizers.py, below
    the export and vocabulary.py) raise it too."""


class NotUtf8Error(FairseqClearError, UnicodeDecodeError):
    """A text file we read is not UTF-8; the message names the file and the line.

    Python's own message gives a byte position inside a read buffer, and no file.
    """

    def __init__(self, path: str, error: UnicodeDecodeError):
        UnicodeDecodeError.__init__(self, error.encoding, error.object, error.start, error.end, error.reason)
        self.path = path
        self.line = first_non_utf8_line(path)

    def __str__(self):
        where = f"{self.path}:{self.line}" if self.line else f"'{self.path}'"
        return f"{where}: not UTF-8 text ({self.reason}); convert the file to UTF-8 (e.g. with iconv)"


def first_non_utf8_line(path: str):
    """1-based number of the first line of ``path`` that is not UTF-8 (None when unknown)."""
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):  # b"\n" never occurs inside a UTF-8 sequence
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    return number
    except OSError:  # standard input, or gone: the message names the file without a line
        return None
    return None


def read_json(path: str, error: type):
    """``json.load`` of ``path``; a file that cannot be read, is not UTF-8 (:class:`NotUtf8Error`),
    is not JSON or is nested too deeply for Python's reader raises ``error`` with one line naming it.
    The one reader of a model folder's JSON files (the import, ``clear-eval-sts --model``)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except UnicodeDecodeError as e:
        raise NotUtf8Error(path, e) from None
    except (OSError, ValueError) as e:
        raise error(f"cannot read '{path}' as JSON: {e}") from None
    except RecursionError:  # json's reader recurses once per nesting level
        raise error(f"cannot read '{path}': its JSON is nested too deeply") from None
