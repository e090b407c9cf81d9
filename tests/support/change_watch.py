"""Stop a command at its Nth change inside a directory (unlink, remove, rmdir, rename, replace): a
kill at every point of a publish, in the test's process or in a ``python -c`` child."""

import os

CHANGES = ("unlink", "remove", "rmdir", "rename", "replace")


def _where(path, dir_fd) -> str:
    path = os.fsdecode(path)
    if dir_fd is not None and not os.path.isabs(path):  # shutil.rmtree's
        path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
    return os.path.realpath(path)


def watch(out, after: int, stop, setattr_=setattr) -> list:
    """Wrap ``os``'s changing calls (through ``setattr_``, e.g. a monkeypatch's): each one inside
    ``out`` is counted, and from the one after the first ``after`` on, ``stop(count)`` is called
    before it happens. Returns the counter (a list of one int)."""
    out, calls = os.path.realpath(out), [0]

    def watched(real):
        def call(*args, **kwargs):
            fd = kwargs.get("dir_fd", kwargs.get("src_dir_fd"))
            paths = [_where(a, fd) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
            if any(p == out or p.startswith(out + os.sep) for p in paths):
                calls[0] += 1
                if calls[0] > after:
                    stop(calls[0])
            return real(*args, **kwargs)
        return call

    for name in CHANGES:
        setattr_(os, name, watched(getattr(os, name)))
    return calls
