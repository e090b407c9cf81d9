"""Replacing a fairseq attribute, reversibly and once.

Each fix wraps fairseq's own function and calls it; the wrapper starts with a check of
``scope.active()`` and is fairseq's function otherwise. The originals are kept so that
:func:`restore_all` puts fairseq back exactly as it was (tests, and the version guard's).
"""

_REPLACED = {}  # (owner, attribute) -> fairseq's original


def replace(owner, attribute: str, make) -> None:
    """``owner.attribute = make(original)``, unless this package already replaced it."""
    key = (owner, attribute)
    if key in _REPLACED:
        return
    original = vars(owner)[attribute] if isinstance(owner, type) else getattr(owner, attribute)
    _REPLACED[key] = original
    setattr(owner, attribute, make(original))


def original(owner, attribute: str):
    """fairseq's own ``owner.attribute`` (also when this package replaced it)."""
    key = (owner, attribute)
    return _REPLACED[key] if key in _REPLACED else getattr(owner, attribute)


def restore_all() -> None:
    for (owner, attribute), value in list(_REPLACED.items()):
        setattr(owner, attribute, value)
    _REPLACED.clear()


def replaced() -> list:
    """``module.attribute`` names of what is replaced now."""
    return sorted(f"{getattr(o, '__module__', '') if isinstance(o, type) else o.__name__}"
                  f"{'.' + o.__name__ if isinstance(o, type) else ''}.{a}" for o, a in _REPLACED)
