"""``clear-config-dir``: print the directory of the plugin's hydra configs (YAML recipes).

    fairseq-hydra-train --config-dir $(clear-config-dir)/pretraining --config-name clear_base \\
      common.user_dir=$(clear-user-dir) task.data=DATA_BIN

The configs are package data: a ``pip install`` has them as a checkout does.
"""

import os

from . import command
from .user_dir import path as package_path


def path() -> str:
    return os.path.join(package_path(), "config")


@command
def main():
    print(path())


if __name__ == "__main__":
    main()
