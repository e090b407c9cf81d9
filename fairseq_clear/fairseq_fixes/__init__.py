"""The fairseq fixes, one per file, applied once when the plugin is imported.

Each module states the fairseq behaviour it changes and the fairseq release it
was written for (``WRITTEN_FOR``); on another release it warns, naming itself.
A new fix goes into a new module here with an ``apply()``, listed in FIXES.
"""

import importlib

#: applied in this order (the loader first: nothing is read before it is safe)
FIXES = (
    "safe_checkpoint_loading",
    "durable_save",
    "atomic_checkpoint_copy",
    "save_dir_lock",
    "finished_run",
    "restore_tokenizer_check",
    "nan_detector",
    "cpu_torchrun",
    "cpu_ddp",
    "heartbeat_timeout",
    "prefetch_threads",
    "update_group",
    "bf16_without_tpu",
    "mixed_precision_resume",
)


def apply():
    for name in FIXES:
        importlib.import_module(f"{__name__}.{name}").apply()
