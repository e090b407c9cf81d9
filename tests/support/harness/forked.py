"""The project's commands run in children forked from an interpreter that has already imported them.

A tiny ``fairseq-train`` spends most of its time importing torch, fairseq and sklearn. Here, once per
test process and import-time environment, a *zygote* (a fresh interpreter) imports the heavy
third-party libraries (``BASE_MODULES``, none of which touches logging); for each command a
*sub-zygote* forked from it imports what the command's own script imports, in the script's order
(so fairseq-train's ``logging.basicConfig`` runs as it does in a real process), then the plugin's
``--user-dir`` when the command names the plugin (as fairseq's option parser would next). Each run
is a child forked from that sub-zygote which does what the interpreter does for the command:

* the console script (or ``python script.py``) through ``runpy.run_path`` as ``__main__``, or
  ``python -m module`` through ``runpy.run_module``, with the run's argv, ``os.environ``, working
  directory, ``sys.path[0]`` and file descriptors 0, 1 and 2;
* in a session of its own (the caller can kill the whole group, as with ``start_new_session``);
* at the end, the interpreter's exit: ``SystemExit``'s code (or its message and 1), an uncaught
  exception's traceback and 1, a KeyboardInterrupt's SIGINT; then non-daemon threads joined,
  atexit handlers run, the streams flushed (120 when that fails), and ``os._exit``.

The import-time environment (``IMPORT_ENV``: PYTHON*, thread counts, NLTK/HF/torch settings, locale,
HOME, TMPDIR...) is part of the zygote's key, so a run never inherits imports made under other
settings. Anything this cannot run exactly as a real process falls back to one (``route`` returns
None): other interpreters' options (``-c``, ``-X``...), programs that are not this environment's
console scripts or Python files, another ``--user-dir``, a ``sitecustomize`` on PYTHONPATH.

Shell recipes use it through PATH shims (``shim_dir``): the commands a recipe starts by name go to
the zygote of the test process that started the recipe, and the shim exits as the command did.

Tests about processes (kills, signals, torchrun, fresh-interpreter checks) start real processes
(``helpers.run_cli(..., real=True)`` or ``subprocess``). ``FAIRSEQ_CLEAR_TESTS_REAL=1`` makes every
run a real process (to compare, or to debug). This module imports only the standard library: the
shims run it with ``python -S -E``.
"""

import atexit
import hashlib
import json
import os
import re
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

#: third-party modules every zygote imports first (heavy, and none configures logging or reads
#: the working directory at import)
BASE_MODULES = ("numpy", "torch", "scipy.stats", "sklearn", "pandas")
#: environment variables read at import time by Python or a library: part of a zygote's key
IMPORT_ENV = re.compile(
    r"^(PYTHON[A-Z]|OMP_|MKL_|OPENBLAS|GOTO|KMP_|GOMP|NLTK|TORCH|PYTORCH|CUDA|HF_|HUGGINGFACE|TRANSFORMERS|"
    r"TOKENIZERS|SENTENCE_TRANSFORMERS|LD_|MALLOC|NUMEXPR|ARROW|XDG_|LC_|LANG$|LANGUAGE$|HOME$|TMPDIR$|"
    r"TEMP$|TMP$|FAIRSEQ)"
)
#: set in the environment of shell recipes: "<import key> <socket>" of the test process's zygote
SOCKET_ENV = "FAIRSEQ_CLEAR_TEST_ZYGOTE"
#: every run a real process
REAL_ENV = "FAIRSEQ_CLEAR_TESTS_REAL"
#: stands for sys.path[0] in a zygote until a run sets it (the script's directory, or the cwd)
_PATH0 = "/nonexistent/fairseq-clear-zygote-path0"
_VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGIN_DIR = os.path.join(_REPO, "fairseq_clear")
#: python -m targets run forked (top-level packages); others (pytest, pip, ruff) start a process
_MODULE_ROOTS = ("fairseq_clear", "fairseq_cli")
#: what ``python -c`` code may have imported ahead (its leading imports, from these packages)
_CODE_PRELOAD_ROOTS = ("fairseq_clear", "fairseq", "fairseq_cli", "torch", "numpy", "transformers",
                       "sentence_transformers")
#: console scripts that start processes of their own as their job
_REAL_SCRIPTS = {"torchrun"}
#: fairseq commands that import the --user-dir only inside their main
_LATE_USER_DIR = {"fairseq_cli.hydra_train"}


# ----------------------------------------------------------------------------------------- routing

def import_key(env) -> str:
    """The import-time part of an environment, as a short hash."""
    items = sorted((k, v) for k, v in env.items() if IMPORT_ENV.match(k) and k != SOCKET_ENV)
    return hashlib.sha1(json.dumps(items).encode()).hexdigest()[:16]


def _which(program, env, cwd):
    if "/" in program:
        return os.path.join(cwd, program) if not os.path.isabs(program) else program
    for d in (env.get("PATH") or os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path if os.path.isabs(path) else os.path.join(cwd, path)
    return None


def _script_imports(path):
    """The module a pip console script of this environment imports, or None for any other file."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = head.splitlines()
    if not lines or not lines[0].startswith("#!") or lines[0][2:].strip() != sys.executable:
        return None
    found = re.search(r"^from ([\w.]+) import \w+$", head, re.M)
    if not found or "sys.exit(" not in head:
        return None
    return found.group(1)


def _user_dir(args, cwd):
    """The --user-dir (or hydra's common.user_dir) a fairseq command line names, absolute."""
    for i, a in enumerate(args):
        value = None
        if a == "--user-dir" and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--user-dir="):
            value = a.split("=", 1)[1]
        elif re.match(r"^\+{0,2}common\.user_dir=", a):
            value = a.split("=", 1)[1]
        if value is not None:
            return os.path.normpath(os.path.join(cwd, value))
    return None


def _leading_imports(code):
    """The modules ``python -c`` code imports before its first other statement (allow-listed)."""
    import ast

    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in body:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module]
        else:
            break
        if any(n.split(".")[0] not in _CODE_PRELOAD_ROOTS for n in names):
            break
        out += names
    return out


def route(args, env, cwd):
    """How to run ``args`` forked: a dict (mode, target, argv, path0, modules, user_dir), or None
    when only a real process does it exactly."""
    args = [os.fsdecode(a) for a in args]
    for d in (env.get("PYTHONPATH") or "").split(os.pathsep):
        if d and any(os.path.exists(os.path.join(cwd, d, f"{n}customize.py")) for n in ("site", "user")):
            return None  # start-up code of the run's own (it may read any variable, e.g. fault injection)
    program = _which(args[0], env, cwd)
    if program is None:
        return None
    program_dir, name = os.path.split(os.path.abspath(program))
    if program_dir != _VENV_BIN:
        return None
    if re.fullmatch(r"python(3(\.\d+)?)?", name):
        rest = args[1:]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1].split(".")[0] in _MODULE_ROOTS:
            parent = rest[1].rpartition(".")[0]
            return {"mode": "module", "target": rest[1], "argv": ["-m", *rest[2:]], "path0": cwd,
                    "modules": [parent] if parent else [], "user_dir": None}
        if len(rest) >= 2 and rest[0] == "-c":
            return {"mode": "code", "target": rest[1], "argv": ["-c", *rest[2:]], "path0": "",
                    "modules": _leading_imports(rest[1]), "user_dir": None}
        if rest and not rest[0].startswith("-") and rest[0].endswith(".py"):
            script = os.path.join(cwd, rest[0])
            if not os.path.isfile(script):
                return None
            return {"mode": "path", "target": script, "argv": rest, "path0":
                    os.path.dirname(os.path.realpath(script)), "modules": [], "user_dir": None}
        return None
    if name in _REAL_SCRIPTS:
        return None
    module = _script_imports(program)
    if module is None:
        return None
    # fairseq's option parsers import the --user-dir first thing; fairseq-hydra-train has none and
    # imports it inside its main, after its call_main: preloading it there would change the run
    user_dir = _user_dir(args[1:], cwd) if module.startswith("fairseq_cli.") and module not in _LATE_USER_DIR else None
    return {"mode": "path", "target": os.path.abspath(program), "argv": [args[0], *args[1:]],
            "path0": os.path.dirname(os.path.realpath(program)), "modules": [module],
            # the plugin is imported ahead; any other user dir is the run's own to import
            "user_dir": user_dir if user_dir == PLUGIN_DIR else None}


# ---------------------------------------------------------------------------------------- protocol

def _send(sock, message, fds=()):
    data = json.dumps(message).encode()
    header = struct.pack("!I", len(data))
    if fds:  # the descriptors travel with the header's bytes
        socket.send_fds(sock, [header], list(fds))
        sock.sendall(data)
    else:
        sock.sendall(header + data)


def _recv_exact(sock, n):
    chunks = b""
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise EOFError
        chunks += chunk
    return chunks


def _recv(sock, maxfds=0):
    if maxfds:
        header, fds, _, _ = socket.recv_fds(sock, 4, maxfds)
        if len(header) < 4:
            if not header:
                raise EOFError
            header += _recv_exact(sock, 4 - len(header))
    else:
        header, fds = _recv_exact(sock, 4), []
    (n,) = struct.unpack("!I", header)
    return json.loads(_recv_exact(sock, n)), list(fds)


# ------------------------------------------------------------------------------------------ zygote

def _import(modules, user_dir):
    import importlib

    for module in modules:
        importlib.import_module(module)
    if user_dir:
        from argparse import Namespace

        from fairseq import utils

        utils.import_user_module(Namespace(user_dir=user_dir))


class _Zygote:
    """The serving loop of a zygote (``key`` ``()``) or sub-zygote: forks runs and sub-zygotes."""

    def __init__(self, listener, workdir, watch_fd=None):
        self.listener = listener
        self.workdir = workdir
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ, ("accept", None))
        if watch_fd is not None:  # the test process's end of a pipe: EOF when it is gone
            self.sel.register(watch_fd, selectors.EVENT_READ, ("watch", None))
        self.watch_fd = watch_fd
        self.runs = {}  # pid -> (conn, pidfd)
        self.subs = {}  # key -> {"pid", "socket", "ready", "waiters", "pipe", "used"}
        self.count = 0

    def close_in_child(self):
        """Close, in a forked child, every descriptor of this loop (through their objects, so that
        none is closed twice when a number is reused)."""
        self.listener.close()
        self.sel.close()
        fds = [self.watch_fd] if self.watch_fd is not None else []
        for conn, pidfd in self.runs.values():
            conn.close()
            fds.append(pidfd)
        for sub in self.subs.values():
            if sub["pipe"] is not None:
                fds.append(sub["pipe"])
            for waiter in sub["waiters"]:
                waiter.close()
        for fd in fds:
            os.close(fd)

    def serve(self):
        while True:
            for key, _ in self.sel.select():
                kind, data = key.data
                if kind == "accept":
                    conn, _ = self.listener.accept()
                    self._request(conn)
                elif kind == "watch":
                    if not os.read(self.watch_fd, 1):
                        self._stop()
                elif kind == "run-exit":
                    self._reap(data)
                elif kind == "run-conn":  # the client went away (or spoke): its run goes too
                    try:
                        os.killpg(data, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self.sel.unregister(key.fileobj)
                elif kind == "sub-ready":
                    self._sub_ready(data)

    def _stop(self):
        for sub in self.subs.values():
            if sub["pid"]:
                try:
                    os.kill(sub["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os._exit(0)

    def _request(self, conn):
        try:
            message, fds = _recv(conn, maxfds=3)
        except (EOFError, OSError, ValueError):
            conn.close()
            return
        if message["op"] == "zygote":
            self._zygote(conn, message)
        elif message["op"] == "run":
            self._run(conn, message, fds)
        else:
            conn.close()

    # runs

    def _run(self, conn, message, fds):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.close_in_child()
            conn.close()
            _child(message, fds)  # never returns
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.runs[pid] = (conn, pidfd)
        self.sel.register(pidfd, selectors.EVENT_READ, ("run-exit", pid))
        self.sel.register(conn, selectors.EVENT_READ, ("run-conn", pid))
        try:
            _send(conn, {"pid": pid})
        except OSError:
            pass

    def _reap(self, pid):
        conn, pidfd = self.runs.pop(pid)
        _, status = os.waitpid(pid, 0)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        try:
            self.sel.unregister(conn)
        except KeyError:
            pass
        try:
            _send(conn, {"status": status})
        except OSError:
            pass
        conn.close()

    # sub-zygotes

    def _zygote(self, conn, message):
        key = json.dumps([message["modules"], message["user_dir"]])
        sub = self.subs.get(key)
        if sub is None:
            sub = self.subs[key] = self._start_sub(message)
        if sub["ready"] is None:
            sub["waiters"].append(conn)
        else:
            self._answer(conn, sub)

    def _start_sub(self, message):
        self.count += 1
        path = os.path.join(self.workdir, f"z{os.getpid()}-{self.count}.sock")
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                _die_with_parent()
                self.close_in_child()
                _import(message["modules"], message["user_dir"])
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(path)
                listener.listen(64)
                os.write(write, b"R")
                os.close(write)
                _Zygote(listener, self.workdir).serve()
            except BaseException as e:  # the real run gets the same failure: say so, stop
                try:
                    os.write(write, f"E{type(e).__name__}: {e}".encode()[:2000])
                finally:
                    os._exit(1)
        os.close(write)
        sub = {"pid": pid, "socket": path, "ready": None, "waiters": [], "pipe": read}
        self.sel.register(read, selectors.EVENT_READ, ("sub-ready", sub))
        return sub

    def _sub_ready(self, sub):
        answer = os.read(sub["pipe"], 4096)
        self.sel.unregister(sub["pipe"])
        os.close(sub["pipe"])
        sub["pipe"] = None
        sub["ready"] = answer == b"R"
        sub["error"] = None if sub["ready"] else (answer[1:].decode(errors="replace") or "exited")
        if not sub["ready"]:
            os.waitpid(sub["pid"], 0)
            sub["pid"] = None
        for conn in sub["waiters"]:
            self._answer(conn, sub)
        sub["waiters"] = []

    def _answer(self, conn, sub):
        try:
            _send(conn, {"socket": sub["socket"]} if sub["ready"] else {"error": sub["error"]})
        except OSError:
            pass
        conn.close()


def _die_with_parent():
    """A sub-zygote goes when its zygote goes (PR_SET_PDEATHSIG); a run does not (fork clears it)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)


def _exit_code(code, err):
    """The exit status the interpreter gives ``SystemExit(code)`` (printing a message code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=err)
    except Exception:
        pass
    return 1


#: frames the run's code starts on: compiled as file "sys", line 1, so that a warning whose
#: stacklevel goes past the script's own frame is reported as the interpreter reports it ("sys:1")
_BOTTOM_FRAMES = 16
_BOTTOM = [compile(f"_f{i}()", "sys", "exec") for i in range(_BOTTOM_FRAMES)]


def _main_module():
    """A fresh ``__main__``, as the interpreter makes it at start-up."""
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __annotations__={}, __package__=None, __spec__=None)
    sys.modules["__main__"] = main
    return main


def _entry(message):
    """The call that runs the command, as a C-level callable (no frame of this module under it)."""
    import functools

    if message["mode"] == "module":  # what ``python -m`` calls
        import runpy

        _main_module()
        return functools.partial(runpy._run_module_as_main, message["target"])
    if message["mode"] == "code":  # what ``python -c`` does
        main = _main_module()
        main.__loader__ = sys.modules["sys"].__loader__  # BuiltinImporter, as for -c
        return functools.partial(exec, compile(message["target"], "<string>", "exec"), main.__dict__)
    main = _main_module()  # what ``python script.py`` does: the file's code in __main__
    from importlib.machinery import SourceFileLoader

    path = message["target"]
    main.__dict__.update(__file__=path, __cached__=None, __loader__=SourceFileLoader("__main__", path))
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    return functools.partial(exec, code, main.__dict__)


def _run_from_bottom(entry):
    """``entry()`` called from the frames of ``_BOTTOM`` (each calls the next through ``exec``)."""
    import functools

    scope = {"__name__": "sys"}
    for i in range(_BOTTOM_FRAMES):
        scope[f"_f{i}"] = functools.partial(exec, _BOTTOM[i + 1], scope) if i + 1 < _BOTTOM_FRAMES else entry
    exec(_BOTTOM[0], scope)


def _traceback_from_main(tb):
    """The traceback as the interpreter prints it: from the script's (or runpy's) first frame."""
    ours = {_child.__code__, _run_from_bottom.__code__, *_BOTTOM}
    while tb is not None and tb.tb_frame.f_code in ours:
        tb = tb.tb_next
    return tb


def _child(message, fds):
    """The run: the command as the interpreter runs it, then the interpreter's exit."""
    os.setsid()
    for target, fd in enumerate(fds):
        if fd != target:
            os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    interrupted = False
    code = 1
    try:
        os.environ.clear()
        os.environ.update(message["env"])
        os.chdir(message["cwd"])
        if message.get("limits"):  # what a preexec_fn would set (e.g. a memory cap)
            import resource

            for name, (soft, hard) in message["limits"].items():
                resource.setrlimit(getattr(resource, name), (soft, hard))
        for name, fd in (("stdout", 1), ("stderr", 2)):
            stream = getattr(sys, name)
            stream.reconfigure(line_buffering=name == "stderr" or os.isatty(fd))
        sys.path[sys.path.index(_PATH0)] = message["path0"]
        if "numpy" in sys.modules:  # a fresh process draws numpy's global seed from the OS
            sys.modules["numpy"].random.seed()
        sys.argv = list(message["argv"])
        try:
            _run_from_bottom(_entry(message))
            code = 0
        except SystemExit as e:
            code = _exit_code(e.code, sys.stderr)
        except BaseException as e:
            tb = _traceback_from_main(e.__traceback__)
            sys.excepthook(type(e), e.with_traceback(tb), tb)
            interrupted, code = isinstance(e, KeyboardInterrupt), 1
        try:
            threading._shutdown()  # the interpreter's exit: non-daemon threads, atexit, flush
        except BaseException:
            pass
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = 120
        if interrupted:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(code)


def zygote_main(listen_path, watch_fd, workdir):
    """Entry of a zygote's interpreter (started by :class:`Pool`)."""
    sys.path[0] = _PATH0
    os.chdir("/")
    _import(BASE_MODULES, None)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(listen_path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    os.dup2(2, 1)  # the test process reads no more: the rest goes to the log
    _Zygote(listener, workdir, watch_fd).serve()


_BOOT = (
    "import importlib.util, sys; "
    "spec = importlib.util.spec_from_file_location('_fairseq_clear_test_zygote', sys.argv[1]); "
    "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m); "
    "m.zygote_main(sys.argv[2], int(sys.argv[3]), sys.argv[4])"
)


# ------------------------------------------------------------------------------------------ client

class ZygoteUnavailable(Exception):
    """The command's imports failed in a zygote: a real process reproduces that failure."""


class Pool:
    """The zygotes of this process, one per import-time environment."""

    def __init__(self):
        self.lock = threading.Lock()
        self.workdir = None
        self.zygotes = {}  # import key -> (Popen, socket path, watch write fd)
        self.subs = {}  # (import key, modules, user dir) -> socket path or ZygoteUnavailable

    def _dir(self):
        if self.workdir is None:
            self.workdir = tempfile.mkdtemp(prefix="fcz-", dir="/tmp")
            atexit.register(self.close)
        return self.workdir

    def base(self, env):
        """The socket of the zygote for ``env``'s import-time settings (started on first use)."""
        key = import_key(env)
        with self.lock:
            if key not in self.zygotes:
                workdir = self._dir()
                path = os.path.join(workdir, f"base-{key}.sock")
                read, write = os.pipe()
                log = open(os.path.join(workdir, f"base-{key}.log"), "w")
                proc = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, os.path.abspath(__file__), path, str(read), workdir],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=dict(env),
                    pass_fds=[read], start_new_session=True, text=True,
                )
                os.close(read)
                log.close()
                if proc.stdout.readline().strip() != "ready":
                    proc.wait()
                    raise RuntimeError(f"the test zygote did not start; see {log.name}")
                self.zygotes[key] = (proc, path, write)
            return key, self.zygotes[key][1]

    def socket_for(self, env, spec):
        key, base = self.base(env)
        if not spec["modules"] and not spec["user_dir"]:
            return base
        sub = (key, tuple(spec["modules"]), spec["user_dir"])
        with self.lock:
            known = self.subs.get(sub)
        if isinstance(known, ZygoteUnavailable):
            raise known
        if known is not None:
            return known
        answer = _ask(base, {"op": "zygote", "modules": spec["modules"], "user_dir": spec["user_dir"]})
        with self.lock:
            self.subs[sub] = answer.get("socket") or ZygoteUnavailable(answer.get("error"))
            known = self.subs[sub]
        if isinstance(known, ZygoteUnavailable):
            raise known
        return known

    def close(self):
        for proc, path, write in self.zygotes.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            os.close(write)
        self.zygotes = {}
        if self.workdir:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)


def _ask(path, message):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        _send(sock, message)
        return _recv(sock)[0]


POOL = Pool()


def enabled(env=None) -> bool:
    return not (env or os.environ).get(REAL_ENV)


class ForkedPopen:
    """A run in a forked child, with the part of :class:`subprocess.Popen`'s interface tests use:
    ``pid``, ``stdout``/``stderr`` (pipes when asked), ``poll``, ``wait``, ``communicate``,
    ``send_signal``/``terminate``/``kill`` (to the run's process group), ``returncode``."""

    def __init__(self, spec, env, cwd, socket_path, stdin=None, stdout=None, stderr=None, text=False,
                 limits=None):
        self.args = spec["argv"]
        self.returncode = None
        self.stdin = self.stdout = self.stderr = None
        ends, mine = [], []

        def end(value, fd, reading):
            if value == subprocess.PIPE:
                r, w = os.pipe()
                child, parent = (r, w) if reading else (w, r)
                mode = ("w" if reading else "r") + ("" if text else "b")
                stream = os.fdopen(parent, mode, encoding="utf-8" if text else None,
                                   errors="strict" if text else None)
                mine.append(child)
                return child, stream
            if value == subprocess.DEVNULL:
                dev = os.open(os.devnull, os.O_RDWR)
                mine.append(dev)
                return dev, None
            if value == subprocess.STDOUT:
                return None, None
            if value is None:
                return fd, None
            return (value if isinstance(value, int) else value.fileno()), None

        in_fd, self.stdin = end(stdin, 0, True)
        out_fd, self.stdout = end(stdout, 1, False)
        err_fd, self.stderr = end(stderr, 2, False)
        if err_fd is None:
            err_fd = out_fd
        ends = [in_fd, out_fd, err_fd]
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(socket_path)
            _send(self._sock, {"op": "run", "mode": spec["mode"], "target": spec["target"],
                               "argv": spec["argv"], "path0": spec["path0"], "env": dict(env),
                               "cwd": os.path.abspath(cwd), "limits": limits or {}}, ends)
            self.pid = _recv(self._sock)[0]["pid"]
        finally:
            for fd in mine:
                os.close(fd)

    def poll(self):
        if self.returncode is None and select.select([self._sock], [], [], 0)[0]:
            self._finish(_recv(self._sock)[0])
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self._sock.settimeout(timeout)
            try:
                self._finish(_recv(self._sock)[0])
            except socket.timeout:
                raise subprocess.TimeoutExpired(self.args, timeout)
            finally:
                if self._sock.fileno() >= 0:
                    self._sock.settimeout(None)
        return self.returncode

    def _finish(self, message):
        self.returncode = os.waitstatus_to_exitcode(message["status"])
        self._sock.close()

    def send_signal(self, sig):
        if self.returncode is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, input=None, timeout=None):
        """Like Popen.communicate: feed stdin, read the pipes to EOF, wait."""
        results = {}

        def pump(name, stream):
            results[name] = stream.read()
            stream.close()

        threads = [threading.Thread(target=pump, args=(n, s), daemon=True)
                   for n, s in (("stdout", self.stdout), ("stderr", self.stderr)) if s is not None]
        for t in threads:
            t.start()
        if self.stdin is not None:
            try:
                if input:
                    self.stdin.write(input)
                self.stdin.close()
            except BrokenPipeError:
                pass
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in threads:
            t.join(None if deadline is None else max(0, deadline - time.monotonic()))
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.01, deadline - time.monotonic()))
        return results.get("stdout"), results.get("stderr")


def popen(args, cwd=None, env=None, **kwargs):
    """A :class:`ForkedPopen` for ``args`` when it can run forked, else ``None``."""
    env = dict(os.environ if env is None else env)
    cwd = os.path.abspath(cwd or os.getcwd())
    if not enabled(env):
        return None
    spec = route(args, env, cwd)
    if spec is None:
        return None
    try:
        path = POOL.socket_for(env, spec)
    except ZygoteUnavailable:
        return None
    return ForkedPopen(spec, env, cwd, path, **kwargs)


def run(args, cwd=None, env=None, timeout=None, input=None, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, limits=None):
    """Like ``subprocess.run`` (output captured, stderr into stdout by default), forked when the
    command allows it and in a real process otherwise. ``limits``: ``{"RLIMIT_AS": (soft, hard)}``,
    set in the run before the command starts."""
    args = [os.fsdecode(a) for a in args]
    kwargs = dict(stdin=subprocess.PIPE if input is not None else None, stdout=stdout, stderr=stderr,
                  text=text)
    proc = popen(args, cwd=cwd, env=env, limits=limits, **kwargs)
    if proc is None:
        def preexec():
            import resource

            for name, value in (limits or {}).items():
                resource.setrlimit(getattr(resource, name), value)

        return subprocess.run(args, cwd=cwd, env=env, timeout=timeout, input=input, stdout=stdout,
                              stderr=stderr, text=text, preexec_fn=preexec if limits else None)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


# ------------------------------------------------------------------------------------------- shims

def shim_dir(env) -> str:
    """A directory of shims for this environment's console scripts and ``python``, to put first on
    a shell recipe's PATH; the environment gets :data:`SOCKET_ENV`. Returns the directory."""
    key, base = POOL.base(env)
    env[SOCKET_ENV] = f"{key} {base}"
    shims = os.path.join(POOL._dir(), "shims")
    if not os.path.isdir(shims):
        os.makedirs(shims + ".tmp", exist_ok=True)
        for name in sorted(os.listdir(_VENV_BIN)):
            path = os.path.join(_VENV_BIN, name)
            if not (name.startswith(("python", "fairseq-", "clear-"))) or not os.access(path, os.X_OK):
                continue
            with open(os.path.join(shims + ".tmp", name), "w") as f:
                f.write(f"#!{sys.executable} -SE\nimport sys\nsys.path.insert(0, {os.path.dirname(__file__)!r})\n"
                        f"import forked\nforked.shim_main({path!r})\n")
            os.chmod(os.path.join(shims + ".tmp", name), 0o755)
        os.rename(shims + ".tmp", shims)
    return shims


def shim_main(real):
    """A shim: the command through the zygote named by the environment, or the real program."""
    args = [real, *sys.argv[1:]]
    env, cwd = dict(os.environ), os.getcwd()
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if os.path.abspath(p) != os.path.dirname(os.path.abspath(sys.argv[0])))
    key, _, base = env.get(SOCKET_ENV, "").partition(" ")
    spec = route(args, env, cwd) if base and key == import_key(env) and enabled(env) else None
    path = None
    if spec is not None:
        try:
            if not spec["modules"] and not spec["user_dir"]:
                path = base
            else:
                answer = _ask(base, {"op": "zygote", "modules": spec["modules"], "user_dir": spec["user_dir"]})
                path = answer.get("socket")
        except OSError:
            path = None
    if path is None:
        os.execve(real, args, env)
    proc = ForkedPopen(spec, env, cwd, path)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    while True:
        try:
            code = proc.wait()
            break
        except InterruptedError:
            continue
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)
