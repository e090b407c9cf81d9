"""Each fix names the fairseq release it was written for; another release gets a warning naming the fix."""

import logging
import warnings

logger = logging.getLogger(__name__)
_warned = set()


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


def check_version(fix: str, written_for: str) -> bool:
    """True when the installed fairseq is the release ``fix`` was written for; warns once otherwise."""
    installed = installed_fairseq_version()
    if installed == written_for:
        return True
    if fix not in _warned:
        _warned.add(fix)
        warnings.warn(
            f"{fix} was written for fairseq {written_for} but fairseq {installed} is installed: "
            "check that the behaviour it fixes is still there (see the module's docstring)",
            stacklevel=2,
        )
    return False
