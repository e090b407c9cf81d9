from . import clear  # noqa: F401  (registers --task clear)
from . import declutr  # noqa: F401  (registers --task declutr)
from . import contrastive_pairs  # noqa: F401  (registers --task contrastive_pairs)
