"""Where the fixes to fairseq act: inside a fairseq-clear run, and nowhere else.

A run is ours when its config names one of the plugin's registered tasks, criterions or
models (read from fairseq's registries, so a new component is covered by registering it).
The scope opens in two places, whichever comes first:

* ``run.py`` runs fairseq's ``main`` inside it when ``call_main``'s config names the plugin
  (fairseq-train, fairseq-eval-lm, fairseq-validate with our --task; in every process);
* :func:`component_built`: each of the plugin's tasks, models and criterions, as fairseq builds
  it inside a fairseq command, opens it for the rest of that command's run (the config that is
  actually built decides: fairseq-hydra-train imports the --user-dir inside its ``main``, after
  its ``call_main``; fairseq-validate and -generate build what the checkpoint's config names,
  whatever their --task). It ends when the command ends, or when the next run of the process
  (hydra's --multirun) builds its components.

Tests and library code that drive fairseq's trainer themselves enter it with :func:`entered`.
Every patched fairseq function starts with ``if not active(): <fairseq's own code>``, so other
tasks in the same process (a translation model, a language model, another plugin's task) see
fairseq exactly as it is; library use (the hub, the clear-* commands) never opens a run.
"""

import atexit
import contextlib
import contextvars
import logging
import sys
from typing import Optional

from ..errors import FairseqClearError

logger = logging.getLogger(__name__)


class _Run:
    """A fairseq-clear run: its config (None when entered without one) and its end-of-run calls."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.at_end = []


#: the run an :func:`entered` block (run.py's ScopedMain included) holds in this context
_RUN = contextvars.ContextVar("fairseq_clear_run", default=None)
#: the run a component opened inside a fairseq command (:func:`component_built`), process-wide
_COMMAND_RUN: Optional[_Run] = None
#: what ends every run besides its at_end calls (run.py: fairseq's prefetch threads, the lock)
_CLEANUP = []
#: while fairseq's trainer loads a checkpoint: whether it resets the optimizer (checkpoint_loading.py)
_RESETTING_OPTIMIZER = contextvars.ContextVar("fairseq_clear_resetting_optimizer", default=False)


class FixUnavailableError(FairseqClearError, RuntimeError):
    """A fix the plugin cannot run safely without was not installed (another fairseq release)."""


def _current() -> Optional[_Run]:
    run = _RUN.get()
    return run if run is not None else _COMMAND_RUN


def active() -> bool:
    """True inside a fairseq-clear run (or an :func:`entered` block)."""
    return _current() is not None


def resetting_optimizer() -> bool:
    """True while fairseq's trainer loads a checkpoint with its optimizer reset (``--reset-optimizer``;
    ``--finetune-from-model`` at a run's first start): the components' own training state (the
    momentum queue) then starts fresh as the optimizer's does."""
    return _RESETTING_OPTIMIZER.get()


@contextlib.contextmanager
def loading_checkpoint(reset_optimizer: bool):
    """The block in which fairseq's trainer loads a checkpoint (see :func:`resetting_optimizer`)."""
    token = _RESETTING_OPTIMIZER.set(bool(reset_optimizer))
    try:
        yield
    finally:
        _RESETTING_OPTIMIZER.reset(token)


def run_config():
    """The config of the fairseq-clear run in progress (``None`` outside one, or when the
    scope was entered without a config)."""
    run = _current()
    return None if run is None else run.cfg


def _check_fixes() -> None:
    from . import missing_required

    missing = missing_required()
    if missing:
        raise FixUnavailableError(
            "fairseq-clear cannot run on this fairseq release without " + "; ".join(missing)
        )


@contextlib.contextmanager
def entered(cfg=None):
    """Make the fixes act in this block (the run's ``cfg`` when there is one)."""
    _check_fixes()
    token = _RUN.set(_Run(cfg))
    try:
        yield
    finally:
        _RUN.reset(token)


def at_end(fn) -> None:
    """Call ``fn()`` when the fairseq-clear run in progress ends (run.ScopedMain: when fairseq's
    main returns; a command's run: when the command ends): fairseq has no task hook after its last
    validation (e.g. the STS summary line). Outside a run: never."""
    run = _current()
    if run is not None:
        run.at_end.append(fn)


def run_ended() -> None:
    """Call the :func:`at_end` functions of this run (once each)."""
    run = _current()
    hooks = run.at_end if run is not None else []
    while hooks:
        hooks.pop(0)()


def on_every_run_end(fn) -> None:
    """``fn()`` ends every run, after its at_end calls, whether it succeeded or not (run.py)."""
    if fn not in _CLEANUP:
        _CLEANUP.append(fn)


def cleanup() -> None:
    for fn in _CLEANUP:
        fn()


def _in_fairseq_command() -> bool:
    """Whether a fairseq command's code (fairseq_cli: train, hydra_train, validate, generate,
    interactive, eval_lm) is on the call stack: the plugin is then a --user-dir of that command,
    not a library in someone's program."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("fairseq_cli."):
            return True
        frame = frame.f_back
    return False


def _root(cfg):
    """The whole config a section belongs to (fairseq keeps the parent when it merges a
    component's dataclass defaults into its section), or None."""
    from omegaconf import OmegaConf

    if not OmegaConf.is_config(cfg):
        return None
    node = cfg
    while node._get_parent() is not None:
        node = node._get_parent()
    return node if node is not cfg else None


def _end_command_run() -> None:
    global _COMMAND_RUN
    if _COMMAND_RUN is None:
        return
    try:
        run_ended()
    finally:
        _COMMAND_RUN = None
        cleanup()


def component_built(cfg, what: str) -> None:
    """One of the plugin's components (``what``: its kind and name) is being built from ``cfg``
    (its config section). Inside a fairseq command whose run is not in the scope yet, the scope
    opens for the rest of the command's run, with the run's whole config."""
    global _COMMAND_RUN
    if _RUN.get() is not None or not _in_fairseq_command():
        return
    root = _root(cfg)
    if _COMMAND_RUN is not None:
        if root is None or root is _COMMAND_RUN.cfg:
            return
        _end_command_run()  # the next run of the same process (hydra --multirun)
    _check_fixes()
    from . import cpu_torchrun

    cpu_torchrun.refuse_workers_alone()
    _COMMAND_RUN = _Run(root)
    atexit.unregister(_end_command_run)
    atexit.register(_end_command_run)
    logger.info("fairseq-clear: the plugin's fixes act in this run (from its %s on)", what)


def _get(section, key) -> Optional[str]:
    if section is None:
        return None
    value = section.get(key, None) if hasattr(section, "get") else getattr(section, key, None)
    return value if isinstance(value, str) else None


def names_plugin(cfg) -> bool:
    """Whether a fairseq config runs one of this package's tasks, criterions or models."""
    from ..checkpoint_safety import plugin_names  # the lower layer: it reads the same registries

    names = plugin_names()
    task, criterion, model = (cfg.get(k) if hasattr(cfg, "get") else getattr(cfg, k, None)
                              for k in ("task", "criterion", "model"))
    return (
        _get(task, "_name") in names["task"]
        or _get(criterion, "_name") in names["criterion"]
        or _get(model, "_name") in names["model"]
        or _get(model, "arch") in names["model"]
    )
