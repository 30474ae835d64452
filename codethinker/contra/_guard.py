"""Protects the ground-truth tracer's hooks from the sample it traces (runs INSIDE the sandbox child).

A sample runs in the same process as :func:`codethinker.contra.tracer.trace_runner`, so it could
switch or replace the trace function, or reach the tracer's frames and closures, and make the
tracer record a false truth. The guard makes every such attempt end as an untraceable sample:

* one ``sys.addaudithook`` hook per process (hooks cannot be removed), installed lazily by the
  runner (never at import time: the parent imports this module too) or by the zygote through
  :func:`install`. Its state lives only in the closure of :func:`install` and is reachable from no
  Python object. It acts only while its gate is on, i.e. while the sample's entry function runs;
* the gate is opened and closed only by ``begin``/``end`` audit events whose calling frames are the
  runner's own (checked by identity in the hook), so the sample cannot forge them;
* while the gate is on, the hook refuses (raises :class:`TraceTampered`, a ``BaseException``) and
  records every audit event that could reach the tracer: ``sys.settrace``/``sys.setprofile``,
  ``sys._getframe`` (``inspect.currentframe``), ``sys._current_frames``, ``tb_frame``/``gi_frame``/
  ``cr_frame``/``ag_frame``, ``gc.get_objects``/``get_referrers``/``get_referents``, setting a
  function's ``__code__``/``__defaults__``/``__kwdefaults__``, ``ctypes.*``, thread starts,
  ``sys.addaudithook``, ``sys.monitoring.*`` (3.12+), opening a raw file descriptor;
* the calls that raise no audit event are refused by a profile function installed with the trace
  function: ``sys.gettrace``/``sys.getprofile`` (they return the tracer's closures), ``signal.signal``
  (a signal handler receives the current frame), the ``os.write`` family (the result pipe), the
  ``_ctypes`` functions, and any call from the sample into this module or the tracer. Calls are
  matched by module and function name, so fresh copies of those modules made through ``_imp`` do
  not help. A refused call also ends the profile function (CPython drops a hook that raises),
  but the record stays;
* at ``begin`` the process must hold no trace, profile, thread-trace or extra audit hook, the same
  signal handlers as when the guard was installed, and the runner's modules unchanged (identity of
  every value); at ``end`` the trace and profile functions must still be the runner's, the modules
  unchanged, and nothing recorded. Otherwise ``end`` raises :class:`TraceTampered` with the reason.

Records are cleared only by the next authentic ``begin``, so a sample cannot erase its own.

The sandbox also *arms* the guard (:func:`arm`, from ``tracer.prepare_process``) in a trace job's
process before the sample's module code runs: from then on the hook refuses the gate's events
outside the entry function too, plus imports of memory-access modules (:data:`DENIED_IMPORTS`)
and opening files of ``/proc``. That keeps the job's key (which the worker adds to the genuine
result frame) out of the sample's reach: a frame the sample writes to the result pipe itself
lacks it and the parent refuses it. The profile function can be dropped by the sample (CPython
removes a profile function that raised), so nothing relies on it alone: the audit hook cannot
be removed. Residual gap (no audit event and no call): patching a module attribute of the
runner's modules and restoring it before the entry function returns.
"""

from __future__ import annotations

import operator
import os
import signal
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from codethinker.contra._guard_rules import (
    DENIED_IMPORTS,
    denied_call,
    denied_event,
)

__all__ = ["TraceTampered", "arm", "begin", "check", "denied_call", "denied_event", "end", "install", "installed"]

EVENT_BEGIN = "codethinker.tracer.guard.begin"
EVENT_END = "codethinker.tracer.guard.end"
EVENT_CHECK = "codethinker.tracer.guard.check"
EVENT_ARM = "codethinker.tracer.guard.arm"


class TraceTampered(BaseException):
    """The sample touched the tracer's hooks: its result is untraceable. A ``BaseException`` so that
    ``except Exception`` in the sample does not swallow the refusal (the record stays anyway)."""


# Every function below that runs while the gate is on reads no module global or builtin at call
# time: they are bound as defaults when this module is imported (replacing ``__defaults__`` is an
# audited event, while a module attribute can be patched silently); so do the rules of
# :mod:`codethinker.contra._guard_rules`.
def _dict_snapshot(d: dict) -> tuple[list, list]:
    return list(d), list(d.values())


def _same_dict(
    d: dict,
    snap: tuple[list, list],
    _len: Callable[..., int] = len,
    _list: type = list,
    _all: Callable[..., bool] = all,
    _map: type = map,
    _is: Callable[..., bool] = operator.is_,
) -> bool:
    keys, values = snap
    return _len(d) == _len(keys) and _all(_map(_is, d.values(), values)) and _list(d) == keys


def _signal_handlers(
    _signals: tuple = tuple(sorted(signal.valid_signals())),
    _getsignal: Callable[..., Any] = signal.getsignal,
    _tuple: type = tuple,
) -> tuple:
    out = []
    for s in _signals:
        try:
            out.append(_getsignal(s))
        except (ValueError, OSError):
            out.append(None)
    return _tuple(out)


_STATE: dict[str, Any] = {}  # "installed": True once the hook is in (public knowledge only)


def installed() -> bool:
    """Whether this process already has the guard's audit hook."""
    return bool(_STATE.get("installed"))


def _proc_device(stat: Callable[..., Any]) -> int | None:
    """The device number of ``/proc`` (None where there is none): what the armed hook refuses to open."""
    try:
        return stat("/proc/self").st_dev
    except OSError:
        return None


# The factories below run inside :func:`install`, once: each captures, at that moment, what its
# closures use (genuine references, reachable only from the closures), so that no closure reads a
# module global at call time (the builtins each read are the same as when they were written inline).
def _recorders(st: dict[str, Any], guarded: list[tuple[str, dict]], snaps: list) -> tuple[Callable, Callable]:
    """``trip(reason)``: keep the first reason of this run; ``changed_modules()``: the first guarded
    module whose dict changed (identity of every value), or None."""
    same_dict, zip_ = _same_dict, zip

    def trip(reason: str | None) -> None:
        if reason is not None and st["tripped"] is None:
            st["tripped"] = reason

    def changed_modules() -> str | None:
        for (name, d), snap in zip_(guarded, snaps, strict=True):
            if not same_dict(d, snap):
                return f"module {name} changed"
        return None

    return trip, changed_modules


def _profile_function(st: dict[str, Any], trip: Callable) -> Callable:
    """The profile function set with the trace function: refuses the denied C calls and any call from
    the sample into this module, its rules or the tracer (the runner's own call of :func:`end` excepted)."""
    tampered, why_call = TraceTampered, denied_call
    end_code = end.__code__
    own_globals, rules_globals = globals(), denied_call.__globals__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if not st["gate"]:
            return
        if event == "c_call":
            why = why_call(arg)
            if why is not None and frame is not st["runner"]:
                trip(why)
                raise tampered(why)
        elif event == "call":
            g = frame.f_globals
            if g is own_globals or g is rules_globals or g is st["tracer_globals"]:
                if frame.f_code is end_code and frame.f_back is st["runner"]:
                    return
                why = f"the sample called the tracer's own code ({frame.f_code.co_name})"
                trip(why)
                raise tampered(why)

    return profile


def _preconditions(st: dict[str, Any], handlers: tuple, changed_modules: Callable) -> Callable:
    """``preconditions()``: why the process is unfit for a run at ``begin``, or None."""
    gettrace, getprofile, get_module = sys.gettrace, sys.getprofile, sys.modules.get
    handlers_now = _signal_handlers

    def preconditions() -> str | None:
        if st["sticky"]:
            return st["sticky"]
        if gettrace() is not None or getprofile() is not None:
            return "a trace or profile function was set before the run"
        threading = get_module("threading")
        if threading is not None and (
            getattr(threading, "_trace_hook", None) is not None or getattr(threading, "_profile_hook", None) is not None
        ):
            return "threading.settrace/setprofile was used"
        if handlers_now() != handlers:
            return "signal handlers changed"
        return changed_modules()

    return preconditions


def _gate(
    st: dict[str, Any],
    trip: Callable,
    changed_modules: Callable,
    preconditions: Callable,
    profile: Callable,
    runner_code: types.CodeType,
) -> tuple[Callable, Callable]:
    """``on_begin(args)`` and ``on_end()``: open and close the gate, for authentic ``begin``/``end``
    events only (the calling frames are checked by identity: the hook calls them directly)."""
    settrace, setprofile, gettrace, getprofile, getframe = (
        sys.settrace,
        sys.setprofile,
        sys.gettrace,
        sys.getprofile,
        sys._getframe,
    )
    tampered = TraceTampered
    begin_code, end_code = begin.__code__, end.__code__

    def on_begin(args: tuple) -> None:
        mine, caller = getframe(2), getframe(3)  # hook <- on_begin: 0, 1; begin(): 2; runner: 3
        if mine.f_code is not begin_code or caller.f_code is not runner_code or st["gate"]:
            st["sticky"] = "guard begin forged"
            raise tampered(st["sticky"])
        trace_fn, tracer_globals = args
        st.update(tripped=preconditions(), runner=caller, trace=trace_fn, tracer_globals=tracer_globals)
        if st["tripped"] is None:
            setprofile(profile)
            settrace(trace_fn)
            st["gate"] = True

    def on_end() -> None:
        mine, caller = getframe(2), getframe(3)
        if mine.f_code is not end_code or st["runner"] is None or caller is not st["runner"]:
            st["sticky"] = "guard end forged"
            raise tampered(st["sticky"])
        was_open = st["gate"]
        st["gate"] = False
        if was_open and gettrace() is not st["trace"]:
            trip("the trace function was replaced or removed")
        if was_open and getprofile() is not profile:
            trip("the guard's profile function was replaced or removed")
        settrace(None)
        setprofile(None)
        trip(changed_modules())
        reason = st["tripped"]
        st.update(runner=None, trace=None, tripped=None, tracer_globals=None)
        if reason is not None:
            raise tampered(reason)

    return on_begin, on_end


def _armed_refusal(stat: Callable[..., Any], proc_dev: int | None) -> Callable:
    """``armed_refusal(event, args)``: what the armed phase refuses beyond the gate's events."""
    denied_imports, str_bytes = DENIED_IMPORTS, (str, bytes)

    def armed_refusal(event: str, args: tuple) -> str | None:
        """What the armed phase refuses beyond the gate's events: imports of memory-access modules
        and opening any file of /proc (``/proc/self/mem`` and friends; symlinks are followed)."""
        if event == "import" and args and type(args[0]) is str and args[0].partition(".")[0] in denied_imports:
            return f"import of {args[0]}"
        if event == "open" and args and type(args[0]) in str_bytes and proc_dev is not None:
            try:
                if stat(args[0]).st_dev == proc_dev:
                    return "open of a file of /proc"
            except (OSError, ValueError):
                return None
        return None

    return armed_refusal


def _audit_hook(
    st: dict, trip: Callable, changed_modules: Callable, gate: tuple, armed_refusal: Callable, protected: set
) -> Callable:
    """The audit hook itself: the gate's events (``gate``: ``on_begin``, ``on_end``), the records and
    refusals while the gate is on or the process is armed, the sticky records before that."""
    on_begin, on_end = gate
    why_event, id_, tampered = denied_event, id, TraceTampered
    ev_begin, ev_end, ev_check, ev_arm = EVENT_BEGIN, EVENT_END, EVENT_CHECK, EVENT_ARM
    settrace_events = ("sys.settrace", "sys.setprofile")

    def hook(event: str, args: tuple) -> None:
        if st["busy"]:
            return  # audit events raised by the hook itself
        if event == ev_arm:
            st["armed"] = True
            return
        if event in (ev_begin, ev_end):
            st["busy"] += 1
            try:
                on_begin(args) if event == ev_begin else on_end()
            finally:
                st["busy"] -= 1
            return
        if event == ev_check:
            if st["gate"]:
                st["busy"] += 1
                try:
                    trip(changed_modules())
                finally:
                    st["busy"] -= 1
            return
        if st["armed"]:
            st["busy"] += 1
            try:
                why = why_event(event, args) or armed_refusal(event, args)
            finally:
                st["busy"] -= 1
            if why is not None:
                if st["gate"]:
                    trip(why)
                elif st["sticky"] is None:
                    st["sticky"] = why  # before the entry function: the process is unfit for tracing
                if event not in settrace_events:
                    raise tampered(why)
            return
        if not st["gate"]:  # records only (sticky: the process is unfit for tracing), refuses nothing
            if event == "sys.addaudithook":  # a later hook would see the runner's events with their frames
                st["sticky"] = "another audit hook was added in this process"
            elif event == "object.__setattr__" and args and id_(args[0]) in protected:
                st["sticky"] = f"a function of the tracer was changed ({args[1]})"
            return
        why = why_event(event, args)
        if why is not None:
            trip(why)
            if event not in settrace_events:  # recorded, not refused: CPython also drops a hook that raised
                raise tampered(why)

    return hook


def install(runner_code: types.CodeType, modules: Iterable[types.ModuleType]) -> None:
    """Add the guard's audit hook to this process, once (later calls do nothing).

    ``runner_code`` is the code object of the only function allowed to call :func:`begin` and
    :func:`end`; ``modules`` are the modules whose dicts must not change (identity of every value).
    The hook and the functions it calls are closures made here (:func:`_recorders`,
    :func:`_profile_function`, :func:`_preconditions`, :func:`_gate`, :func:`_armed_refusal`,
    :func:`_audit_hook`); their state ``st`` is reachable from no Python object.
    """
    if _STATE.get("installed"):
        return
    stat = os.stat
    proc_dev = _proc_device(stat)
    guarded = [(m.__name__, vars(m)) for m in modules]
    snaps = [_dict_snapshot(d) for _, d in guarded]
    protected = {id(v) for _, d in guarded for v in d.values() if type(v) is types.FunctionType}
    handlers = _signal_handlers()
    st: dict[str, Any] = {"gate": False, "armed": False, "busy": 0, "tripped": None, "sticky": None, "runner": None}
    st.update(trace=None, tracer_globals=None)
    trip, changed_modules = _recorders(st, guarded, snaps)
    profile = _profile_function(st, trip)
    preconditions = _preconditions(st, handlers, changed_modules)
    gate = _gate(st, trip, changed_modules, preconditions, profile, runner_code)
    hook = _audit_hook(st, trip, changed_modules, gate, _armed_refusal(stat, proc_dev), protected)
    sys.addaudithook(hook)
    _STATE["installed"] = True


# The bodies use only their defaults and literals: module globals can be patched by a sample at run
# time without any audit event, while replacing ``__defaults__``/``__code__`` is an audited event.
def begin(trace_fn: Callable[..., Any], tracer_globals: dict, _audit: Callable[..., None] = sys.audit) -> None:
    """Open the gate: check the process, set ``trace_fn`` and the guard's profile function (runner only)."""
    _audit("codethinker.tracer.guard.begin", trace_fn, tracer_globals)


def end(_audit: Callable[..., None] = sys.audit) -> None:
    """Close the gate and remove both functions; raises :class:`TraceTampered` if anything was recorded."""
    _audit("codethinker.tracer.guard.end")


def arm(_audit: Callable[..., None] = sys.audit) -> None:
    """Refuse from now on, for the rest of the process (no way back: arming only restricts), what
    the gate refuses plus :data:`DENIED_IMPORTS` and opening files of ``/proc``, also outside the
    entry function: the sandbox arms a trace job's process before the sample's module code runs."""
    _audit("codethinker.tracer.guard.arm")


def check(_audit: Callable[..., None] = sys.audit) -> None:
    """Record a change of the guarded modules while the gate is on (called before each snapshot)."""
    _audit("codethinker.tracer.guard.check")
