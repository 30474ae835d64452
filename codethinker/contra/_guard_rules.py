"""What the tracer's guard (:mod:`codethinker.contra._guard`) refuses: the audit events, the C calls
and the imports (data), the functions it replaces by refusing stubs in an armed process
(:data:`SEALED`), and the pure functions that decide on one event or call (:func:`denied_event`,
:func:`denied_call`, :func:`armed_read`). The guard binds all of it when its hook is installed."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

__all__ = [
    "DENIED_CALLS",
    "DENIED_EVENTS",
    "DENIED_IMPORTS",
    "DENIED_MODULES",
    "DENIED_PREFIXES",
    "FRAME_ATTRS",
    "FUNCTION_ATTRS",
    "SEALED",
    "WRITE_CALLS",
    "armed_read",
    "denied_call",
    "denied_event",
]

# modules whose import is refused while armed: they read or write arbitrary process memory without
# an audit event of their own (the job's key and the tracer's records live in that memory)
DENIED_IMPORTS = frozenset(
    {
        "ctypes",
        "_ctypes",
        "cffi",
        "_cffi_backend",
        "numpy",
        "_testcapi",
        "_testinternalcapi",
        "_testbuffer",
        "_testmultiphase",
        "_testsinglephase",
        "_xxsubinterpreters",
        "_xxinterpchannels",
        "gc",  # already imported: only a second copy (the module removed from sys.modules) comes here
    }
)

# audit events refused while the gate is on or the process is armed (exact names, and name prefixes)
DENIED_EVENTS = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys._getframe",
        "sys._getframemodulename",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.addaudithook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "_thread.start_new_thread",
        "cpython._PySys_ClearAuditHooks",
        "function.__new__",  # a function rebuilt around the given def's code with other defaults or globals
        "code.__new__",
    }
)
DENIED_PREFIXES = ("ctypes.", "sys.monitoring")
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_trace"})
FUNCTION_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__"})
# attributes of the tracer's and the worker's own functions that an armed process may not even read
# (3.11 audits these reads): what they hold is bound there so that nothing patched reaches them
PROTECTED_READS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
WRITE_CALLS = ("write", "writev", "pwrite", "pwritev", "sendfile", "splice", "copy_file_range", "eventfd_write")
# C functions refused by the profile function: (module name, function name); any module object of
# that name counts, so fresh copies made through ``_imp`` do not help
DENIED_CALLS = frozenset(
    {
        ("sys", "gettrace"),
        ("sys", "getprofile"),
        ("sys", "settrace"),
        ("sys", "setprofile"),
        ("sys", "_getframe"),
        ("sys", "_current_frames"),
        ("_signal", "signal"),
        ("_signal", "set_wakeup_fd"),
        ("gc", "set_debug"),
        ("_imp", "create_builtin"),
        *(("posix", name) for name in WRITE_CALLS),
    }
)
DENIED_MODULES = frozenset({"_ctypes"})
# Replaced in the module dicts of an armed process by stubs that refuse the call (a profile function
# does not see a C function called by another C function, such as ``map(gc.set_debug, ...)``):
# ``sys.gettrace``/``getprofile`` return the tracer's closures, a signal handler receives the current
# frame, ``gc.set_debug(DEBUG_SAVEALL)`` keeps collected frames in ``gc.garbage``, ``_imp.create_builtin``
# makes fresh copies of these modules (every builtin module is imported in the zygote), and the
# ``os.write`` family writes to the result pipe. ``gc.garbage`` itself is removed from the gc module.
SEALED = (
    ("sys", "gettrace"),
    ("sys", "getprofile"),
    ("gc", "set_debug"),
    ("_signal", "signal"),
    ("_signal", "set_wakeup_fd"),
    ("signal", "signal"),
    ("signal", "set_wakeup_fd"),
    ("_imp", "create_builtin"),
    *((module, name) for module in ("posix", "os") for name in WRITE_CALLS),
)


# Every function below that runs while the gate is on reads no module global or builtin at call
# time: they are bound as defaults when this module is imported (replacing ``__defaults__`` is an
# audited event, while a module attribute can be patched silently).
def denied_event(
    event: str,
    args: tuple,
    _events: frozenset = DENIED_EVENTS,
    _prefixes: tuple = DENIED_PREFIXES,
    _frame_attrs: frozenset = FRAME_ATTRS,
    _function_attrs: frozenset = FUNCTION_ATTRS,
    _len: Callable[..., int] = len,
    _type: type = type,
    _int: type = int,
    _str: type = str,
) -> str | None:
    """Why an audit event raised while the gate is on is refused, or None (a pure function; it never
    hashes or compares an object of the sample's: a str subclass in ``args`` is not looked up)."""
    if event in _events or event.startswith(_prefixes):
        return event
    if event == "object.__getattr__" and _len(args) >= 2 and _type(args[1]) is _str and args[1] in _frame_attrs:
        return f"{event} {args[1]}"
    if event == "object.__setattr__" and _len(args) >= 2 and _type(args[1]) is _str and args[1] in _function_attrs:
        return f"{event} {args[1]}"
    if event == "open" and args and _type(args[0]) is _int:
        return "open of a raw file descriptor"
    return None


def armed_read(
    event: str,
    args: tuple,
    protected: set,
    _reads: frozenset = PROTECTED_READS,
    _len: Callable[..., int] = len,
    _type: type = type,
    _str: type = str,
    _id: Callable[..., int] = id,
) -> str | None:
    """Why reading an attribute is refused in an armed process: ``__code__``/``__defaults__``/
    ``__kwdefaults__`` of one of the guarded modules' functions (``protected``: their ids)."""
    if (
        event == "object.__getattr__"
        and _len(args) >= 2
        and _type(args[1]) is _str
        and args[1] in _reads
        and _id(args[0]) in protected
    ):
        return f"read of {args[1]} of a function of the tracer or the worker"
    return None


def denied_call(
    fn: Any,
    _calls: frozenset = DENIED_CALLS,
    _modules: frozenset = DENIED_MODULES,
    _module_type: type = types.ModuleType,
    _getattr: Callable[..., Any] = getattr,
    _type: type = type,
    _str: type = str,
) -> str | None:
    """Why a C call seen by the profile function is refused, or None (a pure function)."""
    owner = _getattr(fn, "__self__", None)
    if _type(owner) is not _module_type:
        return None
    mod = _getattr(owner, "__name__", None)
    name = _getattr(fn, "__name__", None)
    if _type(mod) is not _str or _type(name) is not _str:
        return None
    if mod in _modules or (mod, name) in _calls:
        return f"call of {mod}.{name}"
    return None
