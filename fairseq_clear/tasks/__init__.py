"""The plugin's tasks: importing this package imports every module in it, which registers its
tasks in fairseq (``--task clear``, ``declutr``, ``contrastive_pairs``, ...). A new task is
one file here: the checkpoint loader, the fixes' scope and the model card find it in fairseq's
registry."""

import importlib
import pkgutil

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")
