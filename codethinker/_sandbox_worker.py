"""The worker process of :mod:`codethinker.sandbox` (it runs INSIDE the sandbox; not public API).

Started by the parent as ``python -B -E -s -c BOOT CONFIG_JSON``. It imports what samples and
runners need, builds its private temp dir, lowers its limits, drops root for a distinct
unprivileged uid and then serves jobs, one at a time, over two pipes:

* request pipe (parent -> worker): 8-byte little-endian length, then a pickle of a dict
  (the parent is trusted, so the worker uses the ordinary unpickler);
* result pipe (worker -> parent): the same framing; the parent unpickles it with a
  restricted unpickler that refuses every global except ``builtins.complex``.

Per job the worker sends TWO frames: a verdict frame ``{"pure": bool, ...}`` computed from the
source by a static check BEFORE any user code runs (so a hostile sample cannot forge it), and
then the result frame. The parent retires the worker after an impure sample whatever the
result frame says. Pure samples run in this same process with fresh globals and a fresh copy
of the builtins dict; an audit afterwards asks for recycling on any change to process state.

Only the standard library and :mod:`codethinker.contra.values` are imported here (and the
runners in ``RUNNERS``, tolerantly): this module must stay lean and must not import
:mod:`codethinker.sandbox`.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import os
import pickle
import re
import signal
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from codethinker.contra.values import canonicalize

__all__ = ["ALLOWED_MODULES", "BANNED_ATTRS", "BANNED_NAMES", "RUNNERS", "analyze", "main"]

HEADER = struct.Struct("<Q")
MAX_MESSAGE = 256 * 1024 * 1024  # a request larger than this is refused
MAX_ERROR_CHARS = 2000

# Side-effect-free standard modules a "pure" sample may import (their public attributes that
# lead to other modules or to shared mutable containers are banned at startup, see _scan_modules).
ALLOWED_MODULES = frozenset(
    {
        "math",
        "cmath",
        "string",
        "re",
        "collections",
        "collections.abc",
        "itertools",
        "functools",
        "heapq",
        "bisect",
        "operator",
        "copy",
        "typing",
        "fractions",
        "numbers",
        "textwrap",
    }
)
# Modules imported before the privilege drop so that impure samples that import them still work
# where the interpreter's files are not readable by the unprivileged uid (isolation "none").
PRELOAD = (
    *sorted(ALLOWED_MODULES),
    "random",
    "datetime",
    "time",
    "json",
    "decimal",
    "statistics",
    "array",
    "unicodedata",
    "hashlib",
    "base64",
    "dataclasses",
    "enum",
    "abc",
    "types",
    "io",
    "struct",
    "threading",
    "traceback",
    "weakref",
)
# Builtins a pure sample may not name: code execution, namespace access, string-based attribute
# access, I/O, interpreter exits.
BANNED_NAMES = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "open",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "memoryview",
        "exit",
        "quit",
        "help",
        "copyright",
        "credits",
        "license",
    }
)
# Attribute names a pure sample may not use: string-based attribute access, functions that
# mutate the (possibly shared) object they are given, code that evaluates strings.
BANNED_ATTRS = frozenset(
    {
        "attrgetter",
        "methodcaller",
        "register",
        "update_wrapper",
        "wraps",
        "total_ordering",
        "final",
        "no_type_check",
        "runtime_checkable",
        "get_type_hints",
        "ForwardRef",
        "Formatter",
        "get_field",
        "get_value",
        "vformat",
    }
)
_FRAME_ATTR = re.compile(r"^(f|gi|cr|ag|tb|co)_")
_EXTRA_BANNED_ATTRS: set[str] = set()  # filled by _scan_modules

RUNNERS: dict[str, Any] = {
    "call": "codethinker._sandbox_worker:run_call",
    "trace": "codethinker.contra.tracer:trace_runner",
}


# --------------------------------------------------------------------------- purity analysis
def _scan_modules() -> None:
    """Ban public attribute names of allowed modules (and their classes) that reach another
    module outside the allowlist or a shared mutable container (``typing.sys``,
    ``copy.dispatch_table``, ``statistics.random`` ...)."""
    for name in ALLOWED_MODULES:
        mod = sys.modules.get(name) or importlib.import_module(name)
        for key, value in list(vars(mod).items()):
            if key.startswith("_"):
                continue
            if isinstance(value, type(sys)):
                if value.__name__ not in ALLOWED_MODULES:
                    _EXTRA_BANNED_ATTRS.add(key)
            elif isinstance(value, dict | list | set | bytearray):
                _EXTRA_BANNED_ATTRS.add(key)
            elif isinstance(value, type):
                for ckey, cval in list(vars(value).items()):
                    if not ckey.startswith("_") and isinstance(cval, dict | list | set | bytearray | type(sys)):
                        _EXTRA_BANNED_ATTRS.add(ckey)


class _Impure(Exception):
    pass


def _check_tree(tree: ast.AST) -> tuple[str, ...]:
    """Raise :class:`_Impure` with a reason unless ``tree`` is pure; return imported modules."""
    modules: list[str] = []
    nodes = list(ast.walk(tree))
    has_import = any(isinstance(n, ast.Import | ast.ImportFrom) for n in nodes)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in ALLOWED_MODULES:
                    raise _Impure(f"imports {alias.name}")
                if alias.asname and alias.asname.startswith("__"):
                    raise _Impure("dunder import alias")
                modules.append(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level or node.module not in ALLOWED_MODULES:
                raise _Impure(f"imports from {node.module}")
            for alias in node.names:
                n = alias.name
                if n == "*" or n.startswith("_") or n in BANNED_ATTRS or n in _EXTRA_BANNED_ATTRS:
                    raise _Impure(f"imports {n} from {node.module}")
                if alias.asname and alias.asname.startswith("__"):
                    raise _Impure("dunder import alias")
            modules.append(node.module)
        elif isinstance(node, ast.Name):
            if node.id.startswith("__") or node.id in BANNED_NAMES:
                raise _Impure(f"uses name {node.id}")
        elif isinstance(node, ast.Attribute):
            a = node.attr
            if a.startswith("_") or _FRAME_ATTR.match(a) or a in BANNED_ATTRS or a in _EXTRA_BANNED_ATTRS:
                raise _Impure(f"uses attribute {a}")
            if has_import and not isinstance(node.ctx, ast.Load):
                raise _Impure("stores an attribute in a sample that imports modules")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "type" and (len(node.args) != 1 or node.keywords):
                raise _Impure("calls type() with more than one argument")
        elif isinstance(node, ast.ClassDef):
            if node.keywords:
                raise _Impure("class with keywords (metaclass)")
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__del__":
                    raise _Impure("defines __del__")
        elif isinstance(node, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith):
            raise _Impure("async code")
        elif isinstance(node, ast.FunctionDef | ast.Lambda):
            _check_generator(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "__" in node.value and len(node.value) < 64 and re.search(r"__\w+__", node.value):
                raise _Impure("dunder name in a string constant")
    # ``type`` may only be called with one argument, never passed around
    call_funcs = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    for node in nodes:
        if isinstance(node, ast.Name) and node.id == "type" and id(node) not in call_funcs:
            raise _Impure("uses type other than type(x)")
    return tuple(dict.fromkeys(modules))


def _check_generator(fn: ast.AST) -> None:
    """A generator that can run code when it is finalized (try/with around a yield) is impure:
    the garbage collector could run that code during a later sample."""
    stack = list(ast.iter_child_nodes(fn))
    has_yield = False
    has_cleanup = False
    while stack:
        n = stack.pop()
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue  # nested scopes are checked on their own
        if isinstance(n, ast.Yield | ast.YieldFrom):
            has_yield = True
        elif isinstance(n, ast.Try | ast.With | ast.TryStar):
            has_cleanup = True
        stack.extend(ast.iter_child_nodes(n))
    if has_yield and has_cleanup:
        raise _Impure("generator with try/with (finalizer code)")


def analyze(source: str) -> tuple[bool, str, tuple[str, ...], Any]:
    """Return ``(pure, reason, imported_modules, code_or_exception)`` for ``source``.

    Pure means: running it cannot change process state that a later sample could see (given the
    allowlist); see docs/sandbox.md. A source that does not compile is pure (nothing runs).
    """
    try:
        tree = ast.parse(source, "<sample>", "exec")
    except BaseException as exc:  # SyntaxError, MemoryError, RecursionError ...
        return True, "does not parse", (), exc
    try:
        modules = _check_tree(tree)
        pure, reason = True, ""
    except _Impure as exc:
        modules, pure, reason = (), False, str(exc)
    except RecursionError:
        modules, pure, reason = (), False, "too deep to check"
    try:
        code = compile(tree, "<sample>", "exec")
    except BaseException as exc:
        return pure, reason, modules, exc
    return pure, reason, modules, code


# --------------------------------------------------------------------------- runners
def run_call(fn: Callable[..., Any], args: tuple, kwargs: dict, options: dict) -> Any:
    """The ``"call"`` runner: the canonical literal form of ``fn(*args, **kwargs)``."""
    return canonicalize(fn(*args, **kwargs))


def _load_runners() -> dict[str, Callable[..., Any] | str]:
    """Resolve ``RUNNERS``; a runner whose module is missing maps to the error text."""
    out: dict[str, Callable[..., Any] | str] = {}
    for name, spec in RUNNERS.items():
        if callable(spec):
            out[name] = spec
            continue
        mod_name, _, attr = spec.partition(":")
        try:
            out[name] = getattr(importlib.import_module(mod_name), attr)
        except BaseException as exc:
            out[name] = f"runner {name!r} ({spec}) is unavailable: {type(exc).__name__}: {exc}"[:500]
    return out


# --------------------------------------------------------------------------- capture, timer
class _Capped:
    """A text stream that keeps the first ``limit`` characters and drops the rest."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def write(self, s: str) -> int:
        if type(s) is not str:
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        room = self.limit - self.size
        if room > 0:
            part = s[:room]
            self.parts.append(part)
            self.size += len(part)
        self.dropped += max(0, n - max(room, 0))
        return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("captured stream has no file descriptor")

    def getvalue(self) -> str:
        text = "".join(self.parts)
        data = text.encode("utf-8", "replace")
        if len(data) > self.limit:
            text = data[: self.limit].decode("utf-8", "ignore")
        if self.dropped:
            text += f"\n[... {self.dropped} characters dropped]"
        return text


class SandboxTimeout(BaseException):
    """Raised inside the sample by the per-sample timer (a BaseException so ``except Exception``
    in user code does not swallow it)."""


_ACTIVE = [False]


def _on_alarm(signum: int, frame: Any) -> None:
    if _ACTIVE[0]:
        raise SandboxTimeout("time limit exceeded")


def _no_input(*args: Any) -> str:
    raise EOFError("input() is not available in the sandbox")


# --------------------------------------------------------------------------- pipes
def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def _send(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _safe_text(obj: Any, limit: int = MAX_ERROR_CHARS) -> str:
    """``str(obj)`` as an exact ``str`` of at most ``limit`` characters (may run user code)."""
    try:
        s = str(obj)
        if type(s) is not str:
            s = str.__str__(s)
        return s[:limit]
    except BaseException:
        return "<unprintable>"


def _type_name(exc: BaseException) -> str:
    name = type.__dict__["__name__"].__get__(type(exc))
    return name if type(name) is str else "<unknown>"


# --------------------------------------------------------------------------- privileges
def _prctl(option: int, arg: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _lock_down(cfg: dict) -> None:
    import resource

    tmp = cfg["tmpdir"]
    uid = cfg["uid"]
    root = os.geteuid() == 0
    if not os.path.isdir(tmp):
        os.makedirs(tmp, mode=0o700, exist_ok=True)
    if root and uid is not None:
        os.chown(tmp, uid, uid)
    os.chmod(tmp, 0o700)
    os.chdir(tmp)
    os.environ.clear()
    os.environ.update({"HOME": tmp, "TMPDIR": tmp, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    import tempfile

    tempfile.tempdir = tmp

    def setlim(which: int, value: int) -> None:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    setlim(resource.RLIMIT_CORE, 0)
    setlim(resource.RLIMIT_NOFILE, cfg["nofile"])
    setlim(resource.RLIMIT_FSIZE, cfg["fsize"])
    setlim(resource.RLIMIT_NPROC, cfg["nproc"])
    if cfg.get("pdeathsig"):
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (isolation "none"; bwrap does it itself)
        if os.getppid() != cfg["parent_pid"]:
            os._exit(3)
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS: exec of a setuid binary cannot give root back
    if root and uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError("could not drop root")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-size writes fail with EFBIG instead
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, _on_alarm)
    mem = cfg["memory_mb"]
    if mem:
        setlim(resource.RLIMIT_AS, _vm_size_bytes() + mem * 1024 * 1024)


# --------------------------------------------------------------------------- audit
class _Audit:
    """Cheap snapshot of process state that a pure sample must leave unchanged."""

    SIGNALS = (signal.SIGALRM, signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ, signal.SIGPIPE, signal.SIGCHLD)

    def __init__(self, tmpdir: str) -> None:
        self.tmpdir = tmpdir
        self.builtin_ids = [id(v) for v in vars(builtins).values()]
        self.module_ids: dict[str, list[int]] = {}
        self.fixed = self._fixed()

    def _fixed(self) -> tuple:
        import gc
        import threading

        return (
            len(sys.modules),
            sys.getrecursionlimit(),
            tuple(signal.getsignal(s) for s in self.SIGNALS),
            threading.active_count(),
            sys.gettrace(),
            sys.getprofile(),
            len(sys.path),
            len(sys.meta_path),
            len(sys.path_hooks),
            sys.excepthook,
            sys.displayhook,
            gc.isenabled(),
            gc.get_threshold(),
            len(os.environ),
            sys.stdin,
            signal.getitimer(signal.ITIMER_PROF),
            signal.getitimer(signal.ITIMER_VIRTUAL),
        )

    def module_snapshot(self, name: str) -> list[int]:
        return [id(v) for v in vars(sys.modules[name]).values()]

    def check(self, modules: tuple[str, ...]) -> str | None:
        if self._fixed() != self.fixed:
            return "interpreter state changed"
        if [id(v) for v in vars(builtins).values()] != self.builtin_ids:
            return "builtins module changed"
        for name in modules:
            snap = self.module_ids.get(name)
            if snap is None:
                continue
            if self.module_snapshot(name) != snap:
                return f"module {name} changed"
        if os.getcwd() != self.tmpdir:
            return "cwd changed"
        if os.listdir(self.tmpdir):
            return "temp dir not empty"
        return None


# --------------------------------------------------------------------------- main loop
def _run_job(req: dict, runners: dict, pristine: dict, res_fd: int) -> tuple[dict, bool, tuple]:
    source = req["source"]
    pure, reason, modules, code = analyze(source)
    _send(res_fd, {"pure": pure, "reason": reason})
    out = _Capped(req["output_limit"])
    err = _Capped(req["output_limit"])
    sys.stdout, sys.stderr = out, err
    status, value, etype, emsg = "ok", None, None, None
    g: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, req["timeout"], 0.05)
        _ACTIVE[0] = True
        try:
            if isinstance(code, BaseException):
                raise code
            b = dict(pristine)
            b["input"] = _no_input
            g["__builtins__"] = b
            g["__name__"] = "__sandbox__"
            exec(code, g)
            fn = g.get(req["entry"])
            runner = runners.get(req["runner"])
            if fn is None:
                status, etype, emsg = "error", "EntryNotFound", f"no function {req['entry']!r} defined"
            elif not callable(runner):
                status, etype, emsg = "error", "RunnerUnavailable", str(runner or req["runner"])
            else:
                value = runner(fn, req["args"], req["kwargs"], req["options"])
            _ACTIVE[0] = False
        except SandboxTimeout:
            _ACTIVE[0] = False
            status, etype, emsg, value = "timeout", "Timeout", f"exceeded {req['timeout']} s", None
        except MemoryError as exc:
            _ACTIVE[0] = False
            status, etype, emsg, value = "memory", "MemoryError", _safe_text(exc), None
        except BaseException as exc:  # user errors, SystemExit, KeyboardInterrupt ...
            status, value = "error", None
            etype = _type_name(exc)
            emsg = _safe_text(exc)
            _ACTIVE[0] = False
    except SandboxTimeout:  # fired between the user code and the flag reset
        _ACTIVE[0] = False
        status, etype, emsg, value = "timeout", "Timeout", f"exceeded {req['timeout']} s", None
    finally:
        _ACTIVE[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    duration = time.perf_counter() - t0
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    g.clear()
    result = {
        "status": status,
        "value": value,
        "error_type": etype,
        "error_message": emsg,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "duration_s": duration,
    }
    return result, pure, modules


def main(config_json: str) -> None:
    cfg = json.loads(config_json)
    req_fd, res_fd = cfg["req_fd"], cfg["res_fd"]
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    _scan_modules()
    runners = _load_runners()
    pristine = dict(vars(builtins))
    _lock_down(cfg)
    # C-level writes to fd 1/2 (os.write, extensions) go nowhere; the protocol uses other fds.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    sys.stdout = sys.__stdout__ = _Capped(0)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = _Capped(0)  # type: ignore[misc]
    audit = _Audit(cfg["tmpdir"])
    for name in ALLOWED_MODULES:
        audit.module_ids[name] = audit.module_snapshot(name)
    _send(
        res_fd,
        {
            "ready": True,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "runners": sorted(k for k, v in runners.items() if callable(v)),
        },
    )
    while True:
        head = _read_exact(req_fd, HEADER.size)
        if head is None:
            os._exit(0)
        (n,) = HEADER.unpack(head)
        if n > MAX_MESSAGE:
            os._exit(4)
        data = _read_exact(req_fd, n)
        if data is None:
            os._exit(0)
        req = pickle.loads(data)
        result, pure, modules = _run_job(req, runners, pristine, res_fd)
        result["dirty"] = None
        if pure:
            try:
                result["dirty"] = audit.check(modules)
            except BaseException as exc:
                result["dirty"] = f"audit failed: {type(exc).__name__}"
        try:
            _send(res_fd, result)
        except (pickle.PicklingError, TypeError, ValueError, RecursionError, MemoryError) as exc:
            _send(
                res_fd,
                {
                    "status": "error",
                    "value": None,
                    "error_type": "ResultNotSerializable",
                    "error_message": _safe_text(exc),
                    "stdout": result["stdout"],
                    "stderr": result["stderr"],
                    "duration_s": result["duration_s"],
                    "dirty": "result not serializable",
                },
            )
        if not pure or result["dirty"] or req.get("last"):
            os._exit(0)
