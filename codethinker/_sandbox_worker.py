"""The zygote and worker processes of :mod:`codethinker.sandbox` (they run INSIDE the sandbox).

Not public API. The parent starts one *zygote* per worker slot, as
``python -B -S -c BOOT PROJECT_ROOT CONFIG_JSON`` (inside bubblewrap unless isolation is
"none"). The zygote imports what samples and runners need and then never runs user code: on
each ``fork`` message from the parent (a SOCK_SEQPACKET socket carrying the two pipe ends of a
new child) it SIGKILLs and reaps its previous child, recreates the private temp dir and forks a
*child*. The child lowers its limits, drops root for the slot's unprivileged uid, and serves
jobs one at a time over the two pipes:

* request pipe (parent -> child): 8-byte little-endian length, then a pickle of a dict
  (the parent is trusted, so the child uses the ordinary unpickler);
* result pipe (child -> parent): the same framing; the parent unpickles it with a
  restricted unpickler that refuses every global except ``builtins.complex``.

Per job the child sends TWO frames: a verdict frame ``{"pure": bool, ...}`` computed from the
source by a static check BEFORE any user code runs (so a hostile sample cannot forge it), and
then the result frame. The parent replaces the child after an impure sample whatever the
result frame says. Pure samples run one after another in the same child with fresh globals
and a fresh copy of the builtins dict; an audit after each asks for a new child on any change
of interpreter state.

Only the standard library and :mod:`codethinker.contra.values` are imported here (and the
runners in ``RUNNERS``, tolerantly): this module must stay lean and must not import
:mod:`codethinker.sandbox`.
"""

from __future__ import annotations

import _signal
import ast
import builtins
import contextlib
import ctypes
import dis
import gc
import importlib
import json
import operator
import os
import pickle
import re
import resource
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
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
_DUNDER = re.compile(r"__[A-Za-z]\w*__")  # a special name (__builtins__, __del__, __class__ ...)
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
    _FAST_BANNED.update(BANNED_NAMES, BANNED_ATTRS, _EXTRA_BANNED_ATTRS, {"type"})


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
            if _DUNDER.fullmatch(node.id) or node.id in BANNED_NAMES:
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
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DUNDER.search(node.value):
            raise _Impure("dunder in a string constant")
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


_GEN_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
_IMPORT_OPS = bytes([dis.opmap["IMPORT_NAME"], dis.opmap["IMPORT_FROM"]])
_NAME_FLAG = re.compile(r"_|(?:f|gi|cr|ag|tb|co)_")
_FAST_BANNED: set[str] = set()  # filled by _scan_modules
_CACHE: dict[str, tuple] = {}
CACHE_SIZE = 512


def _needs_ast(code: Any) -> bool:
    """Fast path: True when the compiled code shows anything the AST check could object to
    (a name or attribute starting with ``_`` or banned, an import, a generator or coroutine,
    a dunder in a string constant, ``type``). Every AST objection is visible here, so False
    means pure without walking the tree."""
    stack = [code]
    while stack:
        co = stack.pop()
        if co.co_flags & _GEN_FLAGS:
            return True
        names = co.co_names
        if not _FAST_BANNED.isdisjoint(names):
            return True
        for n in names:
            if _NAME_FLAG.match(n):
                return True
        for n in (*co.co_varnames, *co.co_cellvars, *co.co_freevars):
            if n.startswith("__"):
                return True
        ops = co.co_code[::2]
        if _IMPORT_OPS[0] in ops or _IMPORT_OPS[1] in ops:
            return True
        consts = list(co.co_consts)
        while consts:
            c = consts.pop()
            t = type(c)
            if t is str:
                if "__" in c:
                    return True
            elif t is tuple or t is frozenset:
                consts.extend(c)
            elif t is type(co):
                stack.append(c)
    return False


def analyze(source: str) -> tuple[bool, str, tuple[str, ...], Any]:
    """Return ``(pure, reason, imported_modules, code_or_exception)`` for ``source``.

    Pure means: running it cannot change process state that a later sample could see (given the
    allowlist); see docs/sandbox.md. A source that does not compile is pure (nothing runs).
    Results are cached per source (code objects are immutable and pure code cannot reach
    their attributes).
    """
    hit = _CACHE.get(source)
    if hit is not None:
        return hit
    try:
        code = compile(source, "<sample>", "exec", dont_inherit=True)
    except BaseException as exc:  # SyntaxError, MemoryError, RecursionError ...
        return True, "does not compile", (), exc
    pure, reason, modules = True, "", ()
    if _needs_ast(code):
        try:
            modules = _check_tree(ast.parse(source, "<sample>", "exec"))
        except _Impure as exc:
            pure, reason = False, str(exc)
        except BaseException:  # RecursionError, MemoryError on a hostile tree
            pure, reason = False, "too deep to check"
    out = (pure, reason, modules, code)
    if pure:
        if len(_CACHE) >= CACHE_SIZE:
            _CACHE.clear()
        _CACHE[source] = out
    return out


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
_BUILTINS_AT_START = dict(vars(builtins))


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
_LIBC = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> None:
    if _LIBC.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _make_private_dir(path: str, uid: int | None) -> None:
    """(Re)create the child's private temp dir, owned by its uid, mode 0700 (zygote, as root)."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, mode=0o700)
    if uid is not None and os.geteuid() == 0:
        os.chown(path, uid, uid)
    os.chmod(path, 0o700)


def _prepare_zygote(cfg: dict) -> None:
    """Process state every child inherits: environment, temp dir, signal dispositions."""
    tmp = cfg["workdir"]
    os.environ.clear()
    os.environ.update({"HOME": tmp, "TMPDIR": tmp, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    tempfile.tempdir = tmp
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-size writes fail with EFBIG instead
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, _on_alarm)  # harmless in the zygote: it never arms the timer


def _lock_down(cfg: dict) -> None:
    """In the freshly forked child: limits and the privilege drop."""
    uid = cfg["uid"]
    root = os.geteuid() == 0
    os.chdir(cfg["workdir"])

    def setlim(which: int, value: int) -> None:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    setlim(resource.RLIMIT_CORE, 0)
    setlim(resource.RLIMIT_NOFILE, cfg["nofile"])
    setlim(resource.RLIMIT_FSIZE, cfg["fsize"])
    setlim(resource.RLIMIT_NPROC, cfg["nproc"])
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS: exec of a setuid binary cannot give root back
    if root and uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError("could not drop root")
    _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG after setuid (a uid change clears it)
    if os.getppid() != cfg["zygote_pid"]:
        os._exit(3)
    mem = cfg["memory_mb"]
    if mem:
        setlim(resource.RLIMIT_AS, _vm_size_bytes() + mem * 1024 * 1024)


# --------------------------------------------------------------------------- audit
# modules str.encode / bytes.decode may load (codec lookups are not state a sample can use)
_CODEC_MODULES = ("encodings.", "_codecs_", "_multibytecodec", "base64", "binascii", "zlib", "bz2", "_bz2", "quopri")


def _dict_snapshot(d: dict) -> tuple[list, list]:
    return list(d), list(d.values())


def _same_dict(d: dict, snap: tuple[list, list]) -> bool:
    """Same keys in the same order and the very same value objects (no ``==`` on values)."""
    keys, values = snap
    return len(d) == len(keys) and all(map(operator.is_, d.values(), values)) and list(d) == keys


class _Audit:
    """Cheap snapshot of process state that a pure sample must leave unchanged."""

    SIGNALS = (signal.SIGALRM, signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ, signal.SIGPIPE, signal.SIGCHLD)

    def __init__(self, tmpdir: str) -> None:
        self.tmpdir = tmpdir
        self.builtins_snap = _dict_snapshot(vars(builtins))
        self.module_snaps: dict[str, tuple] = {}
        self.module_names = set(sys.modules)
        self.fixed = self._fixed()

    def _fixed(self) -> tuple:
        return (
            len(sys.modules),
            sys.getrecursionlimit(),
            tuple(map(_signal.getsignal, self.SIGNALS)),
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

    FIELDS = (
        "sys.modules",
        "recursion limit",
        "signal handlers",
        "threads",
        "trace function",
        "profile function",
        "sys.path",
        "sys.meta_path",
        "sys.path_hooks",
        "excepthook",
        "displayhook",
        "gc enabled",
        "gc thresholds",
        "environment",
        "stdin",
        "profiling timer",
        "virtual timer",
    )

    def _diff(self, fixed: tuple) -> str:
        return ", ".join(n for n, a, b in zip(self.FIELDS, fixed, self.fixed, strict=True) if a != b)

    def _only_codecs_loaded(self) -> bool:
        new = set(sys.modules) - self.module_names
        if all(n.startswith(_CODEC_MODULES) for n in new):
            self.module_names |= new
            return True
        return False

    def check(self, modules: tuple[str, ...]) -> str | None:
        fixed = self._fixed()
        if fixed != self.fixed:
            if fixed[1:] != self.fixed[1:] or not self._only_codecs_loaded():
                new = sorted(set(sys.modules) ^ self.module_names)[:5]
                return f"interpreter state changed: {self._diff(fixed)} {new}"
            self.fixed = fixed  # str.encode/decode loaded a codec: harmless
        if not _same_dict(vars(builtins), self.builtins_snap):
            return "builtins module changed"
        for name in modules:
            snap = self.module_snaps.get(name)
            if snap is not None and not _same_dict(vars(sys.modules[name]), snap):
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
    if not pure:  # let the report survive a sample that hooked the interpreter (the child retires anyway)
        sys.settrace(None)
        sys.setprofile(None)
        bd = vars(builtins)
        bd.clear()
        bd.update(_BUILTINS_AT_START)
    if status != "timeout" and duration > req["timeout"]:  # the sample swallowed the timer's exception
        status, etype, emsg, value = "timeout", "Timeout", f"exceeded {req['timeout']} s", None
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


def _serve(cfg: dict, req_fd: int, res_fd: int, runners: dict, pristine: dict, audit: _Audit) -> None:
    """The child's life: lock down, announce, run jobs until told to stop or until retiring."""
    _lock_down(cfg)
    # C-level writes to fd 1/2 (os.write, extensions) go nowhere; the protocol uses other fds.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    sys.stdout = sys.__stdout__ = _Capped(0)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = _Capped(0)  # type: ignore[misc]
    _send(res_fd, {"ready": True, "pid": os.getpid(), "uid": os.getuid()})
    while True:
        head = _read_exact(req_fd, HEADER.size)
        if head is None:
            return
        (n,) = HEADER.unpack(head)
        if n > MAX_MESSAGE:
            return
        data = _read_exact(req_fd, n)
        if data is None:
            return
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
            return


def _zygote(cfg: dict, ctl: Any, runners: dict, pristine: dict, audit: _Audit) -> None:
    """Never runs user code. On each ``fork`` message (carrying the two pipe ends of a new
    child) it kills and reaps the previous child, recreates the private temp dir and forks."""
    child = 0
    workdir = cfg["workdir"]
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 64, 2)
        except InterruptedError:
            continue
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)
            child = 0
        if msg != b"fork" or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            shutil.rmtree(workdir, ignore_errors=True)
            return  # b"" (parent gone) or b"stop"
        _make_private_dir(workdir, cfg["uid"])
        gc.freeze()  # the child's collector then never walks (and copies) the zygote's objects
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ctl.close()
                _serve(cfg, fds[0], fds[1], runners, pristine, audit)
            except BaseException:
                code = 5
            finally:
                os._exit(code)
        child = pid
        for fd in fds:
            os.close(fd)


def main(config_json: str) -> None:
    """Entry point of the zygote process (see the module docstring)."""
    cfg = json.loads(config_json)
    sys.path[:] = [p for p in sys.path if p] + list(cfg.get("extra_path", ()))  # no cwd-relative imports
    for name in PRELOAD if cfg.get("preload_all") else sorted(ALLOWED_MODULES):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    _scan_modules()
    runners = _load_runners()
    pristine = dict(vars(builtins))
    if cfg.get("pdeathsig"):
        _prctl(1, signal.SIGKILL)  # isolation "none"; bwrap's --die-with-parent does it otherwise
        if os.getppid() != cfg["parent_pid"]:
            os._exit(3)
    cfg["zygote_pid"] = os.getpid()
    _prepare_zygote(cfg)
    ctl = socket.socket(fileno=cfg["ctl_fd"])
    available = sorted(k for k, v in runners.items() if callable(v))
    ctl.send(json.dumps({"ready": True, "runners": available}).encode())
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    os.close(devnull)
    audit = _Audit(cfg["workdir"])  # the state every child starts from
    for name in ALLOWED_MODULES:
        audit.module_snaps[name] = _dict_snapshot(vars(sys.modules[name]))
    _zygote(cfg, ctl, runners, pristine, audit)
