"""A model restored from another tokenizer's directory is refused at start-up.

fairseq loads ``--restore-file`` / ``--finetune-from-model`` weights whenever their
shapes fit: data encoded by one tokenizer and a model whose embedding rows belong to
another pass silently when the two dictionaries have the same size (two
sentencepiece vocabularies of 32,000 pieces, say). When both the data directory
and the checkpoint's directory record their tokenizer (``clear_tokenizer.json``,
written by clear-prepare and clear-import-hf), they must be the same; the error
names both directories and tokenizers.
"""

import os

from ._version import check_version

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def restored_from(cfg) -> list:
    """The checkpoints fairseq may start this run from (besides SAVE_DIR/checkpoint_last.pt)."""
    paths = []
    if cfg.restore_file and cfg.restore_file != "checkpoint_last.pt":
        paths.append(cfg.restore_file)
    if getattr(cfg, "finetune_from_model", None):
        paths.append(cfg.finetune_from_model)
    return paths


def apply():
    from fairseq import checkpoint_utils

    check_version(__name__, WRITTEN_FOR)
    original = checkpoint_utils.load_checkpoint
    if getattr(original, "_clear_tokenizer_check", False):
        return

    def load_checkpoint(cfg, trainer, **passthrough_args):
        from .. import vocabulary

        data = getattr(trainer.task.cfg, "data", None)
        if data:
            # the first shard (an existing directory with ':' in its name is one path)
            data_dir = data if os.path.isdir(data) else data.split(":")[0]
            for path in restored_from(cfg):
                vocabulary.check_same(data_dir, os.path.dirname(os.path.abspath(path)))
        return original(cfg, trainer, **passthrough_args)

    for attr in ("_clear_locked", "_clear_finished_run"):  # keep the markers of wrappers below this one
        if getattr(original, attr, False):
            setattr(load_checkpoint, attr, True)
    load_checkpoint._clear_tokenizer_check = True
    checkpoint_utils.load_checkpoint = load_checkpoint
