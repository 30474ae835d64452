"""The worker side of the ground-truth tracer (runs INSIDE the sandbox child): the ``"trace"`` runner.

:func:`prepare_process` (called by the sandbox worker after its lock-down, before any code of the
sample) installs and arms the guard (:mod:`codethinker.contra._guard`). :func:`trace_runner` then
calls the entry function under ``sys.settrace`` and records the LOCALS of every block exit
(SPEC §3): the first line event of a later block, or the return, ends each block before it; a block
that ran no line (an ``if`` whose test was false, a ``global`` statement or a bare annotation, which
emit no line event) keeps the locals of the moment control passed it. LOCALS hold only the names the
frame can read (``co_varnames``, ``co_cellvars``, ``co_freevars``), each value in canonical literal
form, variables without one left out.

Every function here reads its helpers from defaults bound at import (tuples: they cannot be changed
in place, and the armed guard refuses assigning or even reading ``__defaults__``, ``__kwdefaults__``
and ``__code__`` of these functions), never from a module global or builtin looked up at call time:
the sample runs in this process and can patch any module attribute.
"""

from __future__ import annotations

import bisect
import sys
import types
from collections.abc import Callable
from typing import Any

from codethinker.contra import _guard, _guard_rules, _guard_seal, values
from codethinker.contra.values import NoLiteral, canonicalize

__all__ = ["prepare_process", "trace_runner"]

_WORKER_MODULES = (  # the sandbox worker's own modules: what it runs after the sample's code
    "codethinker.sandbox.worker.sample",
    "codethinker.sandbox.worker.pipes",
    "codethinker.sandbox.worker.capture",
    "codethinker.sandbox.protocol",
    "codethinker.sandbox.protocol.encoding",
)


def _snapshot(
    f_locals: dict[str, Any],
    names: frozenset,
    state: dict[str, Any],
    _canon: Callable[..., Any] = canonicalize,
    _no_literal: type = NoLiteral,
    _type: type = type,
    _str: type = str,
) -> dict[str, Any]:
    """The frame's variables in canonical form: keys of ``f_locals`` that are names the code can read
    (a ``locals()['ghost'] = 1`` entry is none); a key that is not a str marks the run as tampered."""
    out: dict[str, Any] = {}
    for k, v in f_locals.items():
        if _type(k) is not _str:
            if state["lost"] is None:
                state["lost"] = "a key that is not a str in the traced frame's locals"
            continue
        if k not in names:
            continue
        try:
            out[k] = _canon(v)
        except _no_literal:
            continue
    return out


def _block_recorder(
    code: Any,
    starts: tuple[int, ...],
    names: frozenset,
    exits: list[dict[str, Any]],
    state: dict[str, Any],
    check: Callable[[], None],
    _helpers: tuple = (_snapshot, bisect.bisect_right, max, range),
) -> Callable[..., Any]:
    """The trace function of :func:`trace_runner`: it follows the first call of ``code`` only and, at
    every block exit, appends the frame's locals to ``exits``, one entry for every block control passed
    (a block that ran no line gets the locals of that moment: at the first line event, the entry
    locals); ``state`` holds that frame, its block, whether it returned, and a lost line event. Its
    closures read only what is bound here (defaults and arguments), never a module global."""
    snapshot, bisect_right, max_, range_ = _helpers

    def block_of(lineno: int) -> int:
        return max_(0, bisect_right(starts, lineno - 1) - 1)

    def leave(frame: Any, upto: int) -> None:
        """Record the exits of the blocks from the current one (or the first) to ``upto - 1``."""
        cur = state["block"]
        passed = upto if cur is None else upto - cur
        if passed > 0:
            check()
            snap = snapshot(frame.f_locals, names, state)
            exits.extend(snap for _ in range_(passed))  # blocks passed keep the same locals

    def local(frame: Any, event: str, arg: Any) -> Any:
        if frame is not state["frame"]:
            return None
        if event == "line":
            b = block_of(frame.f_lineno)
            cur = state["block"]
            if cur is None or b > cur:
                leave(frame, b)
                state["block"] = b
        elif event == "return":
            b = block_of(frame.f_lineno)
            cur = state["block"]
            if cur is not None and b != cur and state["lost"] is None:
                state["lost"] = f"line events lost: returned from line {frame.f_lineno} in block {cur}"
            if cur is None:  # no line event at all: the blocks up to the return's own kept the entry locals
                leave(frame, b)
                state["block"] = b
            check()
            exits.append(snapshot(frame.f_locals, names, state))
            state["returned"] = True
        return local

    def global_trace(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and state["frame"] is None and frame.f_code is code:
            state["frame"] = frame
            return local
        return None

    return global_trace


def trace_runner(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    options: dict,
    _guard_fns: tuple = (_guard.begin, _guard.end, _guard.check, _guard.TraceTampered),
    _helpers: tuple = (_block_recorder, canonicalize, tuple, frozenset, type, types.FunctionType, globals),
    _base_exception: type = BaseException,
) -> dict[str, Any]:
    """Run inside the sandbox worker: call ``fn`` under ``sys.settrace`` and record block exits.

    ``options["starts"]`` holds the 0-based first line of every block. Returns plain data:
    ``{"value": canonical return value, "exits": [locals after block 0, 1, ...]}``. The call runs
    under :mod:`codethinker.contra._guard`: a sample that touches the tracer's hooks raises
    :class:`~codethinker.contra._guard.TraceTampered` here (an untraceable sample, never a truth); so
    does a process the guard did not arm before the sample's code ran (:func:`prepare_process`).
    """
    begin, end, check, tampered = _guard_fns
    block_recorder, canon, tuple_, frozenset_, type_, function_type, globals_ = _helpers
    if type_(fn) is not function_type:
        raise tampered("the function under test is not a plain function")
    starts = tuple_(options["starts"])
    if options.get("args_fn"):  # non-literal benchmark inputs, evaluated here inside the sandbox
        args, kwargs = fn.__globals__[options["args_fn"]]()
    code = fn.__code__
    names = frozenset_(code.co_varnames + code.co_cellvars + code.co_freevars)
    exits: list[dict[str, Any]] = []
    state: dict[str, Any] = {"frame": None, "block": None, "returned": False, "lost": None}
    begin(block_recorder(code, starts, names, exits, state, check), globals_())
    try:
        value = canon(fn(*args, **kwargs))  # canonical before the gate closes: end() checks its modules
    except _base_exception:
        try:
            end()
        except tampered:
            pass  # the sample's own error is the result: no truth either way
        raise
    end()  # raises TraceTampered if the sample touched the tracer
    if not state["returned"] or state["lost"] is not None:
        raise tampered(state["lost"] or "the traced function's return was not seen")
    return {"value": value, "exits": exits}


def _guarded_modules() -> list[types.ModuleType]:
    import builtins
    import collections
    import math

    own = [sys.modules[__name__], _guard, _guard_rules, _guard_seal, values, bisect, math, collections, builtins]
    return own + [sys.modules[name] for name in _WORKER_MODULES if name in sys.modules]


def prepare_process() -> None:
    """Called by the sandbox in a trace job's process after its lock-down, before any user code:
    installs the tracer's guard there, and arms and seals it, so the sample's module-level code already
    runs under its refusals (frames, gc, ctypes, memory-access imports, files of /proc, writes to a
    file descriptor: nothing that could read the job's key or the tracer's records), and the guard's
    snapshot of the tracer's modules is taken before user code exists."""
    _guard.install(trace_runner.__code__, _guarded_modules())
    _guard.arm()
