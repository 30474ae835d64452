"""The sandbox side of the code-generation judge: the ``"leetcode_calls"`` runner.

Imported by the sandbox worker's zygote (registered with :func:`codethinker.sandbox.register_runner`),
so it imports only the standard library, the sandbox's helpers and the per-call timer and plain form of
:mod:`codethinker.evaluation.codegen_runner` (:func:`~codethinker.evaluation.codegen_runner.timed_call`,
:func:`~codethinker.evaluation.codegen_runner.plain`).

The job's source is the problem's preamble, the candidate program and a last line the judge writes,
``def __codegen_candidate__(): return Solution().method`` (:mod:`codethinker.codegen.judge`); the
sandbox runs it (the program's module-level code under the job's timer) and hands the runner that
function. The runner runs the preamble again into a namespace of its own (so the program cannot
redefine ``list_node`` or ``tree_node`` for the inputs), then makes each call of ``options["calls"]``
(``[argument text, kind]``, see :mod:`codethinker.codegen.checks`) on a fresh instance's method, under
``options["limit"]`` seconds of its own, and turns its return value into plain data (:func:`plain`).

**No expected value is ever in this process**: the runner only reports what each call returned, and the
parent (:func:`codethinker.codegen.judge.judge_programs`) compares. So nothing the program does here
(an object whose ``__eq__`` always holds, reading the caller's frame, patching this module, writing a
result frame of its own) can do better than returning the right values.

Per call: ``{"status": "ok", "value": plain data}``, ``{"status": "error", "detail": ...}`` (the call
raised, or its value has no plain form: an object, a subclass of a builtin, a cycle) or
``{"status": "timeout"}``. A MemoryError, the job's own timer or a ``SystemExit`` ends the job (the judge
reports the sandbox's status).
"""

from __future__ import annotations

import builtins
import collections
from collections.abc import Callable
from typing import Any

from codethinker.evaluation.codegen_runner import InputTimeout, NotPlain, plain, timed_call
from codethinker.sandbox import register_runner
from codethinker.sandbox.worker.capture import safe_text, type_name

__all__ = ["CANDIDATE", "MAX_NODES", "NotPlain", "leetcode_runner", "plain"]

CANDIDATE = "__codegen_candidate__"  # the function the judge appends: a fresh candidate per call
ARGS_FN = "__codegen_args__"  # the tests' namespace function that turns argument text into (args, kwargs)
DETAIL_CHARS = 200
MAX_NODES = 1_000_000  # nodes walked in a returned linked list or tree (a cycle ends here)


def _nodes(head: Any) -> list[Any]:
    """A returned linked list as its values (``None``: ``[]``), following ``.next``."""
    out: list[Any] = []
    while head is not None:
        if len(out) >= MAX_NODES:
            raise NotPlain(f"linked list longer than {MAX_NODES} nodes (a cycle?)")
        out.append(plain(head.val))
        head = head.next
    return out


def _level_order(root: Any) -> list[Any]:
    """A returned binary tree in level order (:func:`codethinker.codegen.checks.level_order`'s form)."""
    out: list[Any] = []
    todo = collections.deque([root])
    while todo:
        node = todo.popleft()
        if node is None:
            out.append(None)
            continue
        if len(out) >= MAX_NODES:
            raise NotPlain(f"tree of more than {MAX_NODES} nodes (a cycle?)")
        out.append(plain(node.val))
        todo.append(node.left)
        todo.append(node.right)
    while out and out[-1] is None:
        out.pop()
    return out


_AS_PLAIN: dict[str, Callable[[Any], Any]] = {"value": plain, "list": _nodes, "tree": _level_order}


def _call(make: Callable[[], Any], ns: dict[str, Any], args_text: str, kind: str, limit: float) -> dict[str, Any]:
    """One call: its plain value, or why there is none."""
    try:
        args, kwargs = eval(compile(f"{ARGS_FN}({args_text})", "<call>", "eval", dont_inherit=True), ns)
        out = timed_call(lambda: make()(*args, **kwargs), (), limit)
        return {"status": "ok", "value": _AS_PLAIN[kind](out)}
    except InputTimeout:
        return {"status": "timeout"}
    except MemoryError:
        raise
    except Exception as exc:
        return {"status": "error", "detail": f"{type_name(exc)}: {safe_text(exc, DETAIL_CHARS)}"}


def leetcode_runner(fn: Callable[[], Any], args: tuple, kwargs: dict, options: dict) -> dict[str, Any]:
    """Each call of ``options["calls"]`` on ``fn()`` (see the module docstring): ``{"results": [per call]}``;
    ``options``: ``preamble``, ``calls`` (``[argument text, kind]``), ``limit`` (s per call)."""
    ns: dict[str, Any] = {"__builtins__": builtins, "__name__": "__tests__"}
    exec(compile(options["preamble"], "<preamble>", "exec", dont_inherit=True), ns)
    ns[ARGS_FN] = lambda *a, **k: (a, k)
    limit = float(options["limit"])
    return {"results": [_call(fn, ns, text, kind, limit) for text, kind in options["calls"]]}


register_runner("leetcode_calls", "codethinker.codegen.runner:leetcode_runner")
