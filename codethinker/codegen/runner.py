"""The sandbox side of the code-generation judge: the ``"leetcode_tests"`` runner.

Imported by the sandbox worker's zygote (registered with :func:`codethinker.sandbox.register_runner`),
so it imports only the standard library, the sandbox's helpers and the per-call timer of
:mod:`codethinker.evaluation.codegen_runner` (:func:`~codethinker.evaluation.codegen_runner.timed_call`).

The job's source is the problem's preamble, the candidate program and a last line the judge writes,
``def __codegen_candidate__(): return Solution().method`` (:mod:`codethinker.codegen.judge`); the
sandbox runs it (the program's module-level code under the job's timer) and hands the runner that
function. The runner then runs the preamble again into a namespace of the tests' own (so the program
cannot redefine ``is_same_list`` or ``list_node`` for the tests) and each test, one assert statement,
with ``candidate`` bound to a fresh instance's method, under ``options["limit"]`` seconds of its own.
Every test runs (a failure does not stop the next), so the result says how many pass.

Per test: ``pass``, ``fail`` (the assert was false), ``error`` (it raised: its type and message),
``timeout`` (past its limit). A MemoryError, the job's own timer or a ``SystemExit`` ends the job
(the judge reports the sandbox's status). Limits as for HumanEval: code written to fool the judge
(patching ``builtins`` modules the tests share, an object whose ``__eq__`` always holds) can forge
a pass; the sandbox bounds what it can do to the machine.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from codethinker.evaluation.codegen_runner import InputTimeout, timed_call
from codethinker.sandbox import register_runner
from codethinker.sandbox.worker.capture import safe_text, type_name

__all__ = ["CANDIDATE", "leetcode_runner"]

CANDIDATE = "__codegen_candidate__"  # the function the judge appends: a fresh candidate per call
DETAIL_CHARS = 200


def _run_test(make: Callable[[], Any], code: Any, ns: dict[str, Any]) -> None:
    exec(code, {**ns, "candidate": make()})


def _one_test(make: Callable[[], Any], test: str, k: int, ns: dict[str, Any], limit: float) -> dict[str, str]:
    """Run test ``k``: ``{"status": pass|fail|error|timeout}``, with a ``detail`` unless it passed."""
    try:
        code = compile(test, f"<test {k}>", "exec", dont_inherit=True)
        timed_call(_run_test, (make, code, ns), limit)
    except InputTimeout:
        return {"status": "timeout", "detail": f"over {limit:.2f} s"}
    except MemoryError:
        raise
    except AssertionError:
        return {"status": "fail", "detail": f"assertion false: {test[:DETAIL_CHARS]}"}
    except Exception as exc:
        return {"status": "error", "detail": f"{type_name(exc)}: {safe_text(exc, DETAIL_CHARS)}"}
    return {"status": "pass"}


def leetcode_runner(fn: Callable[[], Any], args: tuple, kwargs: dict, options: dict) -> dict[str, Any]:
    """Each of ``options["tests"]`` against ``fn()`` (see the module docstring): ``{"tests": [per-test
    result], "passed": n, "total": n}``; ``options``: ``preamble``, ``tests``, ``limit`` (s per test)."""
    ns: dict[str, Any] = {"__builtins__": builtins, "__name__": "__tests__"}
    exec(compile(options["preamble"], "<preamble>", "exec", dont_inherit=True), ns)
    results = [_one_test(fn, t, k, ns, float(options["limit"])) for k, t in enumerate(options["tests"], start=1)]
    return {"tests": results, "passed": sum(r["status"] == "pass" for r in results), "total": len(results)}


register_runner("leetcode_tests", "codethinker.codegen.runner:leetcode_runner")
