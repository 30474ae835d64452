"""EvalPlus's verdict on a candidate's outputs, made in the parent (HumanEval+, MBPP+).

The candidate's job (:func:`codethinker.evaluation.codegen_runner.tests_runner`, mode ``io``) runs the
inputs and sends back only what each call returned, as plain data (``["v", value]``), or, where the
canonical solution's output is over :data:`~codethinker.evaluation.codegen_runner.BIG_OUTPUT_BYTES` as
text, the sha256 of its ``repr`` (``["d", hex]``), or the type's name of a value with no plain form
(``["n", name]``, a failure); it stops at the first call that raises or runs past its
limit. The expected outputs never enter that process: :func:`io_verdict` compares here, input by input,
with EvalPlus's rules as read in ``evalplus/eval/__init__.py`` and ``evaluate.py`` (:func:`matches`): an
input passes when ``out == exp``, or, when ``atol`` is not 0 (the record's; :data:`FLOAT_ATOL` once an
expected value is a float or a non-empty list/tuple of floats, sticky as in EvalPlus), ``type(out) is
type(exp)``, equal lengths and ``numpy.allclose(out, exp, rtol=RTOL)`` (here: elementwise over equal-shaped
nests of numbers, non-finite values only by ``==``). Special oracles: ``find_zero`` (HumanEval/32:
``|poly(xs, out)| <= atol``), ``set_eq`` (set equality), ``not_none`` (``is not None``) and the second
accepted answers of Mbpp/164, 295, 558, 581. A digest matches only the same digest (the same ``repr``:
exact, type-strict, and a set's order is the worker's).

A verdict is never an exception: whatever the returned frame holds costs only its own answer.

>>> matches(3.0, 3, [1], 0, None), matches(0.30000000000000004, 0.3, [1], 0, None)
((True, 0), (True, 1e-06))
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

from codethinker.evaluation.task import Verdict

__all__ = ["FLOAT_ATOL", "RTOL", "io_verdict", "matches", "second_answer", "short"]

RTOL, FLOAT_ATOL = 1e-7, 1e-6  # numpy.allclose's rtol; EvalPlus's atol for float outputs
DETAIL_CHARS = 500
_repr = reprlib.Repr()  # short texts of inputs and outputs in failure details
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = 6


def short(x: Any) -> str:
    try:
        return _repr.repr(x)
    except Exception:  # a huge int
        return f"<{type(x).__name__}>"


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


def second_answer(special: str, inp: list) -> Any:
    """Mbpp/581 with the slant height taken from the perpendicular one; Mbpp/558 with the
    numbers zero-padded to equal length (EvalPlus's special oracles)."""
    if special == "surface_Area":
        b, h = inp
        return round(b * b + 2 * b * math.sqrt((b / 2) ** 2 + h * h))
    a, b = str(inp[0]), str(inp[1])
    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(len(b)), b.zfill(len(a)), strict=True))


def matches(out: Any, exp: Any, inp: list, atol: float, special: str | None) -> tuple[bool, float]:
    """EvalPlus's comparison of one output (plain data); also the (sticky) atol of the next inputs."""
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
        exact = exact or abs(out - second_answer(special, inp)) <= atol
    elif special == "digit_distance_nums":
        exact = exact or out == second_answer(special, inp)
    elif special == "set_eq":
        exact = set(out) == set(exp)
    if atol == 0 and _is_floats(exp):
        atol = FLOAT_ATOL
    if not exact and atol != 0:
        same = type(out) is type(exp) and (not isinstance(exp, (list, tuple)) or len(out) == len(exp))
        return same and _allclose(out, exp, atol), atol
    return bool(exact), atol


def _one(got: Any, exp: Any, digest: bool, inp: list, atol: float, special: str | None) -> tuple[bool, float, str]:
    """Whether one returned item (``["v", value]`` or ``["d", hex]``) passes; the next atol; the failure text."""
    if type(got) is not list or len(got) != 2 or got[0] not in ("v", "d", "n"):
        return False, atol, "malformed output"
    if got[0] == "n":  # an object with no plain form: never None, never equal to plain data
        ok = special == "not_none" and exp is True
        return ok, atol, f"got a {_text(got[1], 60)} (no plain form), expected {short(exp)}"
    if digest or got[0] == "d":  # an output too big to come back: its repr's sha256 against the canonical one's
        ok = digest and got[0] == "d" and type(got[1]) is str and got[1] == exp
        return ok, atol, f"got {'a digest' if got[0] == 'd' else short(got[1])} other than the expected output's"
    try:
        ok, atol = matches(got[1], exp, inp, atol, special)
    except Exception as exc:
        return False, atol, f"got {short(got[1])}; comparing it raised {type(exc).__name__}"
    return ok, atol, f"got {short(got[1])}, expected {short(exp)}"


def _text(x: Any, limit: int = 200) -> str:
    return x[:limit] if type(x) is str else f"<{type(x).__name__}>"


def io_verdict(value: Any, phases: list[dict[str, Any]], atol: float, special: str | None) -> Verdict:
    """The verdict on one answer from its io job's result ``value``; ``phases``: the expectation of each phase
    (``name``, ``inputs``, ``outputs``, ``digest``: indices whose output is a digest)."""
    total = sum(len(ph["inputs"]) for ph in phases)
    got = value.get("phases") if type(value) is dict else None
    if type(got) is not list or len(got) > len(phases) or not all(type(g) is list for g in got):
        return Verdict(False, "error", "malformed test result")
    stop = value.get("stop")
    done = 0
    for p, ph in enumerate(phases):
        outs = got[p] if p < len(got) else []
        for i, inp in enumerate(ph["inputs"]):
            where = f"{done}/{total} passed; {ph['name']} input {i} {short(tuple(inp))}"
            if i >= len(outs):
                ok_stop = type(stop) is dict and stop.get("phase") == p and stop.get("index") == i
                if not ok_stop or stop.get("status") not in ("timeout", "error"):
                    return Verdict(False, "error", f"{where}: malformed test result"[:DETAIL_CHARS])
                return Verdict(False, stop["status"], f"{where}: {_text(stop.get('detail'))}"[:DETAIL_CHARS])
            try:
                ok, atol, why = _one(outs[i], ph["outputs"][i], i in ph["digest"], inp, atol, special)
            except Exception as exc:  # a hostile value that no rule above foresaw
                ok, why = False, f"malformed output ({type(exc).__name__})"
            if not ok:
                return Verdict(False, "fail", f"{where}: {why}"[:DETAIL_CHARS])
            done += 1
    return Verdict(True, "pass", f"{done}/{total} passed")
