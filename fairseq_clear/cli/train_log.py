"""fairseq-train for the recipes, its full output in a log file and the user's terminal kept clear.

    python -m fairseq_clear.cli.train_log --log FILE -- [fairseq-train options]

runs fairseq-train (``fairseq_cli.train.cli_main``, unchanged) with every log record written to
FILE and, on stdout, all but what a user does not need to watch: fairseq's config dump and model
repr (logged as objects, not text), the known deprecation warnings of third-party libraries
(hydra, omegaconf, torch, fairseq's own) and fairseq's per-epoch batching chatter. Everything kept
off the terminal is in FILE, whose path is printed first. The recipes add ``--log-format tqdm``
(fairseq's progress bar with its ETA, counting to --max-update when that comes first:
fairseq_fixes/progress_total.py) on a terminal and ``--log-format json`` (plain lines)
elsewhere; a ``--log-format`` of yours wins.
"""

import logging
import os
import re
import sys
import traceback

FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"
DATEFMT = "%Y-%m-%d %H:%M:%S"

#: third-party warnings a user cannot act on (they stay in the log file)
KNOWN_WARNINGS = re.compile(
    r"[/\\](hydra|omegaconf|fairseq|fairseq_cli)[/\\]|ConfigStore schema|version_base|"
    r"pin_memory|torch\.cuda\.amp|torch\.amp\.|TypedStorage is deprecated|weights_only"
)
#: fairseq's INFO lines about re-creating batches (four a validation) and the plugin imported by
#: this launcher before fairseq-train's --user-dir
CHATTER = re.compile(r"^(can_reuse_epoch_itr|reuse_dataloader|rebuild_batches|creating new batches|"
                     r"--user-dir=.* has already been imported)")


def for_the_terminal(record: logging.LogRecord) -> bool:
    """Whether a record is shown on the terminal (every record goes to the log file)."""
    if not isinstance(record.msg, str):  # fairseq's logger.info(cfg) and logger.info(model)
        return False
    if record.name == "py.warnings":
        return not KNOWN_WARNINGS.search(record.getMessage())
    if record.name.startswith("fairseq.") and CHATTER.match(record.getMessage()):
        return False
    return True


def setup(log_file: str) -> None:
    """The root logger: every record to ``log_file``, the ones for the user to stdout."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    formatter = logging.Formatter(FORMAT, datefmt=DATEFMT)
    terminal = logging.StreamHandler(sys.stdout)
    terminal.setFormatter(formatter)
    terminal.addFilter(for_the_terminal)
    in_file = logging.FileHandler(log_file, encoding="utf-8")
    in_file.setFormatter(formatter)
    root.addHandler(terminal)
    root.addHandler(in_file)
    root.setLevel(os.environ.get("LOGLEVEL", "INFO").upper())


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "--log":
        sys.exit(__doc__.strip().split("\n\n")[1])
    log_file, rest = argv[1], argv[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
    logging.captureWarnings(True)  # warnings become py.warnings records: in the file, filtered above
    from fairseq_cli import train  # its basicConfig first, then ours replaces the handlers

    setup(log_file)
    print(f"training log (config, model, warnings and every line below): {log_file}", flush=True)
    sys.argv = ["fairseq-train"] + rest
    try:
        train.cli_main()
    except Exception:
        with open(log_file, "a", encoding="utf-8") as f:
            f.write(traceback.format_exc())
        raise


if __name__ == "__main__":
    main()
