"""``clear-user-dir``: print the directory to pass to ``fairseq-train --user-dir``.

fairseq imports a user dir by path, so an installed plugin is used as
``fairseq-train --user-dir $(clear-user-dir) ...`` from any working directory.
"""

import os


def path() -> str:
    import fairseq_clear

    return os.path.dirname(os.path.abspath(fairseq_clear.__file__))


def main():
    print(path())


if __name__ == "__main__":
    main()
