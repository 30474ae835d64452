"""Protects the ground-truth tracer's hooks from the sample it traces (runs INSIDE the sandbox child).

A sample runs in the same process as the trace runner (:mod:`codethinker.contra.trace_worker`), so it
could switch or replace the trace function, or reach the tracer's frames and closures, and make the
tracer record a false truth. The guard makes every such attempt end as an untraceable sample:

* one ``sys.addaudithook`` hook per process (hooks cannot be removed), installed by
  ``trace_worker.prepare_process`` in a trace job's process before the sample's code runs (never at
  import time: the parent imports this module too). Its state lives only in the closures made by
  :func:`install` and is reachable from no Python object;
* it *arms* the process at once (:func:`arm`): from then on, for the rest of the process, the hook
  refuses (raises :class:`TraceTampered`, a ``BaseException``, and records it) every audit event that
  could reach the tracer (:func:`~codethinker.contra._guard_rules.denied_event`: trace and profile
  functions, frames, ``gc.get_objects``/``get_referrers``, setting a function's ``__code__`` or
  defaults, ``ctypes``, threads, new audit hooks, opening a raw file descriptor), reading
  ``__code__``/``__defaults__``/``__kwdefaults__`` of the tracer's and the worker's functions, imports
  of memory-access modules (:data:`~codethinker.contra._guard_rules.DENIED_IMPORTS`), opening a file of
  ``/proc`` or a pipe or socket by path (``/proc/self/fd/N`` is the result pipe);
* arming also *seals* the process (:mod:`codethinker.contra._guard_seal`): the C functions that give
  frames or hooks without an audit event, or write to a file descriptor, are replaced in their module
  dicts by stubs that refuse the call, ``gc.garbage`` is removed, and a gc callback records and undoes
  any gc debug flag;
* the gate (the entry function's run) is opened and closed only by ``begin``/``end`` audit events whose
  calling frames are the runner's own (checked by identity in the hook), so the sample cannot forge
  them; while it is on, a profile function also refuses calls from the sample into the tracer's code;
* at ``begin`` the process must be armed and sealed as it was, hold no trace, profile or extra audit
  hook, the same signal handlers as when the guard was installed, and the runner's modules unchanged
  (identity of every key and value); at ``end`` the trace and profile functions must still be the
  runner's, the modules and the seal unchanged, and nothing recorded. Otherwise ``end`` raises
  :class:`TraceTampered` with the reason. A refusal before ``begin`` is sticky: the process can no
  longer give a truth.

While the hook works (``busy``) it refuses every audit event but the ones it raises itself in narrow
windows around its own C calls: code of the sample's that runs inside the hook (a ``__hash__`` or
``__eq__`` reached through a dict) gains nothing there. Records are cleared only by the next authentic
``begin``, so a sample cannot erase its own.
"""

from __future__ import annotations

import gc
import operator
import os
import signal
import stat as stat_mod
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from codethinker.contra import _guard_seal
from codethinker.contra._guard_rules import DENIED_IMPORTS, armed_read, denied_call, denied_event

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
def _same_dict(
    d: dict,
    snap: tuple[list, list],
    _len: Callable[..., int] = len,
    _all: Callable[..., bool] = all,
    _map: type = map,
    _is: Callable[..., bool] = operator.is_,
) -> bool:
    """Same keys and values, by identity (no ``==``: a key of the sample's could run code)."""
    keys, values = snap
    return _len(d) == _len(keys) and _all(_map(_is, d.values(), values)) and _all(_map(_is, d, keys))


def _signal_handlers(
    _signals: tuple = tuple(sorted(signal.valid_signals())),
    _getsignal: Callable[..., Any] = signal.getsignal,
    _tuple: type = tuple,
    _errors: tuple = (ValueError, OSError),
) -> tuple:
    out = []
    for s in _signals:
        try:
            out.append(_getsignal(s))
        except _errors:
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
# module global at call time.
def _recorders(st: dict[str, Any], guarded: list[tuple[str, dict]], snaps: list) -> tuple[Callable, Callable]:
    """``trip(reason)``: keep the first reason of this run; ``changed_modules()``: the first guarded
    module whose dict changed (identity of every key and value), or None."""
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


def _preconditions(st: dict[str, Any], handlers: tuple, changed_modules: Callable, sealed: Callable) -> Callable:
    """``preconditions()``: why the process is unfit for a run at ``begin``, or None."""
    gettrace, getprofile, get_module = sys.gettrace, sys.getprofile, sys.modules.get
    handlers_now, is_, all_, map_, getattr_ = _signal_handlers, operator.is_, all, map, getattr
    module_type, type_ = types.ModuleType, type

    def preconditions() -> str | None:
        if st["sticky"]:
            return st["sticky"]
        if not st["armed"]:
            return "the guard was not armed before the sample's code ran"
        if gettrace() is not None or getprofile() is not None:
            return "a trace or profile function was set before the run"
        threading = get_module("threading")
        if type_(threading) is module_type and (
            getattr_(threading, "_trace_hook", None) is not None
            or getattr_(threading, "_profile_hook", None) is not None
        ):
            return "threading.settrace/setprofile was used"
        if not all_(map_(is_, handlers_now(), handlers)):
            return "signal handlers changed"
        return sealed() or changed_modules()

    return preconditions


def _gate(
    st: dict[str, Any],
    trip: Callable,
    checks: tuple[Callable, Callable, Callable],
    profile: Callable,
    runner_code: types.CodeType,
) -> tuple[Callable, Callable]:
    """``on_begin(args)`` and ``on_end()``: open and close the gate, for authentic ``begin``/``end``
    events only (the calling frames are checked by identity: the hook calls them directly)."""
    changed_modules, preconditions, sealed = checks
    settrace, setprofile, gettrace, getprofile, getframe = (
        sys.settrace,
        sys.setprofile,
        sys.gettrace,
        sys.getprofile,
        sys._getframe,
    )
    tampered = TraceTampered
    begin_code, end_code = begin.__code__, end.__code__
    own_reads = ("sys._getframe", "object.__getattr__")

    def callers() -> tuple[Any, Any]:
        st["allow"] = own_reads  # the hook's own frame reads (audited) in this window only
        try:
            mine, caller = getframe(3), getframe(4)  # hook <- on_* <- callers: 0-2; begin()/end(): 3
            return mine.f_code, caller
        finally:
            st["allow"] = ()

    def set_hooks(trace_fn: Any, profile_fn: Any) -> None:
        st["allow"] = ("sys.settrace", "sys.setprofile")
        try:
            setprofile(profile_fn)
            settrace(trace_fn)
        finally:
            st["allow"] = ()

    def on_begin(args: tuple) -> None:
        code, caller = callers()
        st["allow"] = own_reads
        try:
            caller_code = caller.f_code
        finally:
            st["allow"] = ()
        if code is not begin_code or caller_code is not runner_code or st["gate"]:
            st["sticky"] = "guard begin forged"
            raise tampered(st["sticky"])
        trace_fn, tracer_globals = args
        st.update(tripped=preconditions(), runner=caller, trace=trace_fn, tracer_globals=tracer_globals)
        if st["tripped"] is None:
            set_hooks(trace_fn, profile)
            st["gate"] = True

    def on_end() -> None:
        code, caller = callers()
        if code is not end_code or st["runner"] is None or caller is not st["runner"]:
            st["sticky"] = "guard end forged"
            raise tampered(st["sticky"])
        was_open = st["gate"]
        st["gate"] = False
        if was_open and gettrace() is not st["trace"]:
            trip("the trace function was replaced or removed")
        if was_open and getprofile() is not profile:
            trip("the guard's profile function was replaced or removed")
        set_hooks(None, None)
        trip(sealed() or changed_modules())
        reason = st["tripped"]
        st.update(runner=None, trace=None, tripped=None, tracer_globals=None)
        if reason is not None:
            raise tampered(reason)

    return on_begin, on_end


def _armed_refusal(stat: Callable[..., Any], proc_dev: int | None, protected: set) -> Callable:
    """``armed_refusal(event, args)``: what the armed phase refuses beyond the gate's events."""
    denied_imports, str_bytes, type_, str_, read = DENIED_IMPORTS, (str, bytes), type, str, armed_read
    is_fifo, is_sock, errors = stat_mod.S_ISFIFO, stat_mod.S_ISSOCK, (OSError, ValueError)

    def armed_refusal(event: str, args: tuple) -> str | None:
        """Imports of memory-access modules; opening any file of /proc (``/proc/self/mem`` and
        friends; symlinks are followed) or a pipe or socket by path (``/proc/self/fd/N`` and
        ``/dev/fd/N`` reopen the result pipe); reading a protected function's code or defaults."""
        if event == "import" and args and type_(args[0]) is str_ and args[0].partition(".")[0] in denied_imports:
            return f"import of {args[0]}"
        if event == "open" and args and type_(args[0]) in str_bytes:
            try:
                st_ = stat(args[0])
            except errors:
                return None
            if (proc_dev is not None and st_.st_dev == proc_dev) or is_fifo(st_.st_mode) or is_sock(st_.st_mode):
                return "open of a file of /proc, a pipe or a socket"
            return None
        return read(event, args, protected)

    return armed_refusal


def _audit_hook(
    st: dict, trip: Callable, check_now: Callable, gate: tuple, armed_refusal: Callable, seal: tuple
) -> Callable:
    """The audit hook itself: the gate's events (``gate``: ``on_begin``, ``on_end``), the seal's
    events (``seal``: apply, gc callback, refused stub), the records and refusals while the gate is
    on or the process is armed, the sticky records before that."""
    on_begin, on_end = gate
    apply_seal, on_gc = seal
    why_event, tampered, type_, str_ = denied_event, TraceTampered, type, str
    ev_begin, ev_end, ev_check, ev_arm = EVENT_BEGIN, EVENT_END, EVENT_CHECK, EVENT_ARM
    ev_refused, ev_gc = _guard_seal.EVENT_REFUSED, _guard_seal.EVENT_GC

    def refuse(why: str) -> None:
        if st["gate"]:
            trip(why)
        elif st["sticky"] is None:
            st["sticky"] = why  # before the entry function: the process is unfit for tracing
        raise tampered(why)

    def hook(event: str, args: tuple) -> None:
        if st["busy"]:
            if event in st["allow"] or event == "builtins.id" or event == ev_gc:
                return  # the hook's own frame reads and hook switches, in their windows; id() is harmless;
                # a collection that starts inside the hook is checked at the next one
            refuse(f"{event} while the guard was working (the sample's code ran inside it)")
        st["busy"] += 1
        try:
            if event == ev_begin:
                on_begin(args)
            elif event == ev_end:
                on_end()
            elif event == ev_check:
                if st["gate"]:
                    trip(check_now())
            elif event == ev_arm:
                if not st["armed"]:
                    st["armed"] = True
                    apply_seal()
            elif event == ev_gc:
                on_gc()
            elif event == ev_refused:
                refuse(f"call of {args[0] if args and type_(args[0]) is str_ else 'a sealed function'}")
            elif st["armed"] or st["gate"]:
                why = why_event(event, args) or (armed_refusal(event, args) if st["armed"] else None)
                if why is not None:
                    refuse(why)
            elif event == "sys.addaudithook":  # not armed: records only (a later hook would see the runner's events)
                st["sticky"] = "another audit hook was added in this process"
        finally:
            st["busy"] -= 1

    return hook


def install(runner_code: types.CodeType, modules: Iterable[types.ModuleType]) -> None:
    """Add the guard's audit hook to this process, once (later calls do nothing).

    ``runner_code`` is the code object of the only function allowed to call :func:`begin` and
    :func:`end`; ``modules`` are the modules whose dicts must not change (identity of every key and
    value) and whose functions' code and defaults an armed process may not read. The hook and the
    functions it calls are closures made here; their state ``st`` is reachable from no Python object.
    """
    if _STATE.get("installed"):
        return
    stat = os.stat
    proc_dev = _proc_device(stat)
    guarded = [(m.__name__, vars(m)) for m in modules]
    snaps = [(list(d), list(d.values())) for _, d in guarded]
    protected = {id(v) for _, d in guarded for v in d.values() if type(v) is types.FunctionType}
    handlers = _signal_handlers()
    st: dict[str, Any] = {"gate": False, "armed": False, "busy": 0, "allow": (), "tripped": None, "sticky": None}
    st.update(runner=None, trace=None, tracer_globals=None)
    trip, changed_modules = _recorders(st, guarded, snaps)
    apply_seal, on_gc, sealed = _guard_seal.make_seal(st, gc.get_debug, gc.set_debug, gc.garbage, gc.callbacks)
    preconditions = _preconditions(st, handlers, changed_modules, sealed)
    profile = _profile_function(st, trip)
    gate = _gate(st, trip, (changed_modules, preconditions, sealed), profile, runner_code)

    def check_now() -> str | None:
        return sealed() or changed_modules()

    hook = _audit_hook(st, trip, check_now, gate, _armed_refusal(stat, proc_dev, protected), (apply_seal, on_gc))
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
    """Arm and seal this process for the rest of its life (no way back: arming only restricts): the
    refusals of the gate plus the armed ones, also outside the entry function (module docstring)."""
    _audit("codethinker.tracer.guard.arm")


def check(_audit: Callable[..., None] = sys.audit) -> None:
    """Record a change of the guarded modules or of the seal while the gate is on (called before each
    snapshot of the locals)."""
    _audit("codethinker.tracer.guard.check")
