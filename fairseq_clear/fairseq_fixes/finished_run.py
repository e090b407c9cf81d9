"""A restart of a finished run does nothing, and says so.

fairseq checks ``--max-update`` only after a training step: restarting a run whose
``checkpoint_last.pt`` already reached it trains one more update and saves again,
so every kill between the final save and exit (and each restart after it) adds an
update, breaking "killed at any moment, same weights". After the checkpoint is
restored, a run that is already at ``--max-update`` exits 0 with a log line.
"""

import logging
import sys

from ._version import check_version

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def apply():
    from fairseq import checkpoint_utils

    check_version(__name__, WRITTEN_FOR)
    original = checkpoint_utils.load_checkpoint
    if getattr(original, "_clear_finished_run", False):
        return

    def load_checkpoint(cfg, trainer, **passthrough_args):
        result = original(cfg, trainer, **passthrough_args)
        max_update = trainer.cfg.optimization.max_update or 0
        if max_update > 0 and trainer.get_num_updates() >= max_update:
            logger.info(
                "nothing to do: the run in %s already reached --max-update %d (at update %d); "
                "raise --max-update to train further", cfg.save_dir, max_update, trainer.get_num_updates(),
            )
            logging.shutdown()
            sys.exit(0)
        return result

    for attr in ("_clear_locked",):  # keep the markers of wrappers below this one
        if getattr(original, attr, False):
            setattr(load_checkpoint, attr, True)
    load_checkpoint._clear_finished_run = True
    checkpoint_utils.load_checkpoint = load_checkpoint
