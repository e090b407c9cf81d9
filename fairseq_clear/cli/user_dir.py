"""``clear-user-dir``: print the directory to pass to ``fairseq-train --user-dir``.

fairseq imports a user dir by path, so an installed plugin is used as
``fairseq-train --user-dir $(clear-user-dir) ...`` from any working directory.
"""

import importlib.util
from . import command


def path() -> str:
    # find_spec does not execute the package, so nothing but the path is printed
    spec = importlib.util.find_spec("fairseq_clear")
    return list(spec.submodule_search_locations)[0]


@command
def main():
    print(path())


if __name__ == "__main__":
    main()
