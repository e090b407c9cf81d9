"""The package's error base class.

Every error that a user's option, input or file causes derives from :class:`FairseqClearError`
(and from the built-in class it always was, so ``except ValueError`` keeps working). Its
message names the option or file; the command-line tools print it as one ``error:`` line
(``cli.command``). Kept free of imports: anything may raise it.
"""


class FairseqClearError(Exception):
    """An option, input or file that fairseq-clear cannot use; the message names it."""
