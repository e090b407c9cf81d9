"""One name per row of a table that lists several models or runs (clear-eval-sts, clear-eval-senteval,
clear-eval-multitask, clear-plot): never two rows with one name, never a row dropped, and the same
names for the same paths in every run.

A row's name is the shortest end of its path that no other row's path ends with: two recipe exports
``runs/minilm/export`` and ``runs/simcse/export`` are ``minilm/export`` and ``simcse/export``, one
alone is ``export``. The same path given twice is numbered (``export (2)``), as is a name given by
the user (``--name``) that another row would also take.
"""

import os
from typing import List, Optional, Sequence


def unique_names(paths: Sequence[str], min_parts: int = 1, given: Sequence[Optional[str]] = ()) -> List[str]:
    """A unique name per path, in order. ``min_parts``: path components a name has at least (clear-plot:
    2, its logs are all train.log); ``given``: a name per path that is used as it is (None: none)."""
    given = list(given) + [None] * (len(paths) - len(given))
    parts = [os.path.abspath(str(p)).split(os.sep) for p in paths]
    taken = {name for name in given if name}
    names = []
    for i, path in enumerate(parts):
        if given[i]:
            names.append(given[i])
            continue
        others = [q for j, q in enumerate(parts) if q != path and not given[j]]
        k = min(min_parts, len(path))
        while k < len(path) and ("/".join(path[-k:]) in taken or any(q[-k:] == path[-k:] for q in others)):
            k += 1
        names.append("/".join(path[-k:]).lstrip("/") or os.sep)
    used = set()
    for i, name in enumerate(names):  # still the same: one path twice, or a given name another takes
        candidate, n = name, 1
        while candidate in used:
            n += 1
            candidate = f"{name} ({n})"
        used.add(candidate)
        names[i] = candidate
    return names
