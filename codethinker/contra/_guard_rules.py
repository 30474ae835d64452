"""What the tracer's guard (:mod:`codethinker.contra._guard`) refuses: the audit events, the C calls
and the imports (data), and the two pure functions that decide on one event or call
(:func:`denied_event`, :func:`denied_call`). The guard binds all of it when its hook is installed."""

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
    }
)

# audit events refused while the gate is on (exact names, and name prefixes)
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
    }
)
DENIED_PREFIXES = ("ctypes.", "sys.monitoring")
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_trace"})
FUNCTION_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__"})
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
        ("posix", "write"),
        ("posix", "writev"),
        ("posix", "pwrite"),
        ("posix", "pwritev"),
        ("posix", "sendfile"),
        ("posix", "splice"),
        ("posix", "copy_file_range"),
    }
)
DENIED_MODULES = frozenset({"_ctypes"})


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
) -> str | None:
    """Why an audit event raised while the gate is on is refused, or None (a pure function)."""
    if event in _events or event.startswith(_prefixes):
        return event
    if event == "object.__getattr__" and _len(args) >= 2 and args[1] in _frame_attrs:
        return f"{event} {args[1]}"
    if event == "object.__setattr__" and _len(args) >= 2 and args[1] in _function_attrs:
        return f"{event} {args[1]}"
    if event == "open" and args and _type(args[0]) is _int:
        return "open of a raw file descriptor"
    return None


def denied_call(
    fn: Any,
    _calls: frozenset = DENIED_CALLS,
    _modules: frozenset = DENIED_MODULES,
    _module_type: type = types.ModuleType,
    _getattr: Callable[..., Any] = getattr,
    _type: type = type,
) -> str | None:
    """Why a C call seen by the profile function is refused, or None (a pure function)."""
    owner = _getattr(fn, "__self__", None)
    if _type(owner) is not _module_type:
        return None
    mod = _getattr(owner, "__name__", None)
    name = _getattr(fn, "__name__", None)
    if mod in _modules or (mod, name) in _calls:
        return f"call of {mod}.{name}"
    return None
