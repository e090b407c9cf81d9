"""Where the fixes to fairseq act: inside a fairseq-clear run, and nowhere else.

A run is ours when its config names one of the plugin's registered tasks, criterions or
models (read from fairseq's registries, so a new component is covered by registering it).
``run.py`` runs fairseq's ``main`` of such a run inside the scope; tests and library code
that drive fairseq's trainer themselves enter it with :func:`entered`. Every patched
fairseq function starts with ``if not active(): <fairseq's own code>``, so other tasks in
the same process (a translation model, a language model, another plugin's task) see
fairseq exactly as it is.
"""

import contextlib
import contextvars
from typing import Optional
from ..errors import FairseqClearError

#: the run's config while a fairseq-clear run is in progress in this context, else None
_RUN = contextvars.ContextVar("fairseq_clear_run", default=None)
_INACTIVE = object()


class FixUnavailableError(FairseqClearError, RuntimeError):
    """A fix the plugin cannot run safely without was not installed (another fairseq release)."""


def active() -> bool:
    """True inside a fairseq-clear run (or an :func:`entered` block)."""
    return _RUN.get() is not None


def run_config():
    """The config of the fairseq-clear run in progress (``None`` outside one, or when the
    scope was entered without a config)."""
    cfg = _RUN.get()
    return None if cfg is None or cfg is _INACTIVE else cfg


@contextlib.contextmanager
def entered(cfg=None):
    """Make the fixes act in this block (the run's ``cfg`` when there is one)."""
    from . import missing_required

    missing = missing_required()
    if missing:
        raise FixUnavailableError(
            "fairseq-clear cannot run on this fairseq release without " + "; ".join(missing)
        )
    token = _RUN.set(_INACTIVE if cfg is None else cfg)
    hooks = _AT_END.set([])
    try:
        yield
    finally:
        _AT_END.reset(hooks)
        _RUN.reset(token)


#: functions to call when the run's ``main`` has returned (see :func:`at_end`)
_AT_END = contextvars.ContextVar("fairseq_clear_at_end", default=None)


def at_end(fn) -> None:
    """Call ``fn()`` when the fairseq-clear run in progress ends normally (run.ScopedMain): fairseq
    has no task hook after its last validation (e.g. the STS summary line). Outside a run: never."""
    hooks = _AT_END.get()
    if hooks is not None:
        hooks.append(fn)


def run_ended() -> None:
    """Call the :func:`at_end` functions of this run (once each)."""
    hooks = _AT_END.get() or []
    while hooks:
        hooks.pop(0)()


def _root_package() -> str:
    # "fairseq_clear", or the module name fairseq gave the --user-dir when it is another
    return __name__.split(".")[0]


def plugin_names() -> dict:
    """{"task": names, "criterion": names, "model": model and architecture names} that this
    package registered in fairseq."""
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    root = _root_package()

    def ours(cls) -> bool:
        module = getattr(cls, "__module__", "") or ""
        return module == root or module.startswith(root + ".")

    models = {name for name, cls in MODEL_REGISTRY.items() if ours(cls)}
    models |= {name for name, cls in ARCH_MODEL_REGISTRY.items() if ours(cls)}
    return {
        "task": {name for name, cls in TASK_REGISTRY.items() if ours(cls)},
        "criterion": {name for name, cls in CRITERION_REGISTRY.items() if ours(cls)},
        "model": models,
    }


def _get(section, key) -> Optional[str]:
    if section is None:
        return None
    value = section.get(key, None) if hasattr(section, "get") else getattr(section, key, None)
    return value if isinstance(value, str) else None


def names_plugin(cfg) -> bool:
    """Whether a fairseq config runs one of this package's tasks, criterions or models."""
    names = plugin_names()
    task, criterion, model = (cfg.get(k) if hasattr(cfg, "get") else getattr(cfg, k, None)
                              for k in ("task", "criterion", "model"))
    return (
        _get(task, "_name") in names["task"]
        or _get(criterion, "_name") in names["criterion"]
        or _get(model, "_name") in names["model"]
        or _get(model, "arch") in names["model"]
    )
