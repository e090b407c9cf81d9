"""Restoring a fairseq-clear run from a checkpoint: one path, in order.

In a fairseq-clear run (scope.py), fairseq's ``checkpoint_utils.load_checkpoint(cfg, trainer)``
(resume, ``--restore-file``, ``--finetune-from-model``) does:

1. **same tokenizer**: a checkpoint restored from another directory must come from the
   tokenizer that made the data when both directories record theirs (``clear_tokenizer.json``);
   fairseq loads any weights whose shapes fit, so two 32,000-piece vocabularies pass silently;
2. **safe reading**: fairseq's own loading, with its ``load_checkpoint_to_cpu`` going through
   ``checkpoint_safety.checked`` (``weights_only=True`` whatever the environment asks, CRC-32s,
   and the config checked before fairseq builds anything it names);
3. **the optimizer reset**: while fairseq's ``Trainer.load_checkpoint`` runs, ``scope.resetting_optimizer()``
   says whether it resets the optimizer (``--reset-optimizer``, ``--finetune-from-model``), so that the
   criterion's momentum queue, training state like the optimizer's moments, starts fresh too;
4. **finished runs**: a run already at ``--max-update`` exits 0 with one line. fairseq checks
   ``--max-update`` only after a step, so each restart of a finished run would train one more
   update, and "killed at any moment, same weights" would not hold.

Outside a fairseq-clear run ``load_checkpoint`` is fairseq's own, and so is ``load_checkpoint_to_cpu``
for a checkpoint whose own config (read as plain data, without its tensors) names none of the
plugin's components (with torch's allow-list of the plain-data classes fairseq checkpoints hold,
installed by the plugin for every task). One that names them (``fairseq-validate --task masked_lm
--path clear.pt`` builds the checkpoint's clear task) or that cannot be read as plain data is read
safely as above: with the plugin loaded, no checkpoint runs code in fairseq's loader, even when
torch's environment asks for unsafe loading.
"""

import functools
import logging
import os
import sys

from . import _patching, save_dir_lock, scope

logger = logging.getLogger(__name__)

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"
#: what the plugin's runs would lose without it (they refuse to start instead)
REQUIRED = "the safe checkpoint loading of the plugin's training runs"


def safe_load_checkpoint_to_cpu(path, *args, allow_nonfinite: bool = False, **kwargs):
    """fairseq's ``load_checkpoint_to_cpu`` behind the plugin's checks (any scope: the hub)."""
    from fairseq import checkpoint_utils

    from ..checkpoint_safety import checked

    return checked(_patching.original(checkpoint_utils, "load_checkpoint_to_cpu"), path, *args,
                   allow_nonfinite=allow_nonfinite, **kwargs)


def restored_from(cfg) -> list:
    """The checkpoints fairseq may start this run from (besides SAVE_DIR/checkpoint_last.pt)."""
    paths = []
    if cfg.restore_file and cfg.restore_file != "checkpoint_last.pt":
        paths.append(cfg.restore_file)
    if getattr(cfg, "finetune_from_model", None):
        paths.append(cfg.finetune_from_model)
    return paths


def check_same_tokenizer(cfg, trainer) -> None:
    from .. import vocabulary

    data = getattr(trainer.task.cfg, "data", None)
    if not data:
        return
    data_dir = vocabulary.first_shard(data)
    for path in restored_from(cfg):
        vocabulary.check_same(data_dir, os.path.dirname(os.path.abspath(path)))


def exit_if_finished(cfg, trainer) -> None:
    max_update = trainer.cfg.optimization.max_update or 0
    if max_update > 0 and trainer.get_num_updates() >= max_update:
        logger.info(
            "nothing to do: the run in %s already reached --max-update %d (at update %d); "
            "raise --max-update to train further", cfg.save_dir, max_update, trainer.get_num_updates(),
        )
        logging.shutdown()
        sys.exit(0)


def install():
    from fairseq import checkpoint_utils

    def make_load_checkpoint(fairseq_load_checkpoint):
        @functools.wraps(fairseq_load_checkpoint)
        def load_checkpoint(cfg, trainer, **passthrough_args):
            if not scope.active():
                return fairseq_load_checkpoint(cfg, trainer, **passthrough_args)
            if trainer.is_data_parallel_master:  # a run whose scope opened after fairseq's write check
                save_dir_lock.take(cfg)
            check_same_tokenizer(cfg, trainer)
            result = fairseq_load_checkpoint(cfg, trainer, **passthrough_args)  # reads safely: below
            exit_if_finished(cfg, trainer)
            return result

        return load_checkpoint

    def make_load_checkpoint_to_cpu(fairseq_load_checkpoint_to_cpu):
        @functools.wraps(fairseq_load_checkpoint_to_cpu)
        def load_checkpoint_to_cpu(path, *args, **kwargs):
            from ..checkpoint_safety import checked, names_plugin

            # outside a run, the checkpoint's own config decides (what fairseq builds from it next):
            # ours, or not readable as plain data, goes through the safe reading too
            if not scope.active() and names_plugin(path) is False:
                return fairseq_load_checkpoint_to_cpu(path, *args, **kwargs)
            return checked(fairseq_load_checkpoint_to_cpu, path, *args, **kwargs)

        return load_checkpoint_to_cpu

    def make_trainer_load_checkpoint(fairseq_trainer_load_checkpoint):
        @functools.wraps(fairseq_trainer_load_checkpoint)
        def trainer_load_checkpoint(self, filename, reset_optimizer=False, *args, **kwargs):
            if not scope.active():
                return fairseq_trainer_load_checkpoint(self, filename, reset_optimizer, *args, **kwargs)
            with scope.loading_checkpoint(reset_optimizer):
                return fairseq_trainer_load_checkpoint(self, filename, reset_optimizer, *args, **kwargs)

        return trainer_load_checkpoint

    from fairseq.trainer import Trainer

    _patching.replace(checkpoint_utils, "load_checkpoint", make_load_checkpoint)
    _patching.replace(checkpoint_utils, "load_checkpoint_to_cpu", make_load_checkpoint_to_cpu)
    _patching.replace(Trainer, "load_checkpoint", make_trainer_load_checkpoint)
