"""Fixes to fairseq's behaviour that act only inside a fairseq-clear run.

One fix per module. Each states in its docstring the fairseq behaviour it changes and
``WRITTEN_FOR``, the fairseq release it was written and tested against; a module that
wraps a fairseq function has ``install()``, whose wrapper is fairseq's own function unless
``scope.active()`` (a run whose config names one of the plugin's tasks, criterions or models:
see scope.py). Other tasks in the same process therefore get fairseq unchanged.

The list of fixes is this package's modules (a new fix is a new file). On another fairseq
release a fix is not used and one warning names it (``_version.applies``); a ``REQUIRED``
one makes the plugin's runs refuse to start instead.
"""

import importlib
import pkgutil

from . import _patching
from ._version import applies

#: modules here that are not fixes
_NOT_FIXES = {"scope"}


def modules() -> list:
    """Every fix module, in name order."""
    names = sorted(info.name for info in pkgutil.iter_modules(__path__)
                   if not info.name.startswith("_") and info.name not in _NOT_FIXES)
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def install() -> None:
    """Install every fix written for the installed fairseq (idempotent)."""
    for module in modules():  # every one is decided (and named, when it does not apply) now
        if applies(module) and hasattr(module, "install"):
            module.install()


def uninstall() -> None:
    """Put every fairseq attribute a fix replaced back as fairseq had it."""
    _patching.restore_all()


def missing_required() -> list:
    """What a required fix that is not used on this fairseq release leaves unsafe."""
    return [f"{m.__name__} ({m.REQUIRED})" for m in modules()
            if getattr(m, "REQUIRED", None) and not applies(m)]
