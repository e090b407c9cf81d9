"""Fault injection for the real CLIs: put this directory on PYTHONPATH.

CLEAR_FAULT_SAVE_FAILURES="2,3": the 2nd and 3rd ``torch.save`` calls of the process
write a few bytes and then fail with ENOSPC, as a disk that is briefly full does.
"""

import os

_spec = os.environ.get("CLEAR_FAULT_SAVE_FAILURES", "")
if _spec:
    import errno

    import torch

    _fail_at = {int(x) for x in _spec.split(",") if x.strip()}
    _real_save = torch.save
    _calls = [0]

    def _save(obj, f, *args, **kwargs):
        _calls[0] += 1
        if _calls[0] in _fail_at:
            if hasattr(f, "write"):
                f.write(b"PK\x03\x04" + b"\0" * 4096)
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return _real_save(obj, f, *args, **kwargs)

    torch.save = _save
