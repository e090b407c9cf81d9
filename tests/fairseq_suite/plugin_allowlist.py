"""pytest plugin: torch's weights_only allow-list of fairseq's plain-data classes, nothing else.

What fairseq needs to load its own checkpoints on torch >= 2.6. The list is taken from
fairseq_clear/allowlist.py, loaded as a lone file so that the plugin package (and
its fixes) is not imported in this run.
"""

import importlib.util
from pathlib import Path

_path = Path(__file__).resolve().parents[2] / "fairseq_clear" / "allowlist.py"
_spec = importlib.util.spec_from_file_location("_fairseq_clear_allowlist", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
_module.allow_fairseq_checkpoints()
