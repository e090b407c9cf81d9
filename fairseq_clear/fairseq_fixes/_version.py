"""Each fix names the fairseq release it was written for; on another release it is not used.

fairseq's internals (the functions a fix wraps, the state it reads) change between releases,
so a fix is installed only on the release it was written and tested against. Otherwise one
warning names it; a fix marked ``REQUIRED`` makes the plugin's runs refuse to start instead
(``scope.entered``), since running without it would be unsafe.
"""

import logging
import warnings

logger = logging.getLogger(__name__)
_decided = {}  # module name -> whether it applies


def installed_fairseq_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        for dist in ("fairseq-fixed", "fairseq"):
            try:
                return version(dist)
            except PackageNotFoundError:
                continue
    except ImportError:  # pragma: no cover
        pass
    import fairseq

    return getattr(fairseq, "__version__", "unknown")


def applies(module) -> bool:
    """Whether the fix in ``module`` is used with the installed fairseq (warns once when not)."""
    name = module.__name__
    if name not in _decided:
        installed = installed_fairseq_version()
        _decided[name] = installed == module.WRITTEN_FOR
        if not _decided[name]:
            consequence = ("fairseq-clear's runs refuse to start without it"
                           if getattr(module, "REQUIRED", False) else "it is not applied")
            warnings.warn(
                f"{name} was written for fairseq {module.WRITTEN_FOR} but fairseq {installed} is "
                f"installed: {consequence} (its docstring says what it fixes)",
                stacklevel=2,
            )
    return _decided[name]


def forget() -> None:
    """Decide again (tests that pretend another fairseq release)."""
    _decided.clear()
