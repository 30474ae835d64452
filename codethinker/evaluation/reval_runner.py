"""The sandbox side of REval's tasks: the ``"reval"`` runner (registered with
:func:`codethinker.sandbox.register_runner`).

Imported inside the sandbox worker, so it imports the standard library only (``inspect``, ``linecache``
and ``unittest`` lazily, when a ClassEval test is run). Two modes (``options["mode"]``):

* ``truth``: the executed ground truth, as REval's ``dynamics.Sandbox`` records it. The program is
  compiled as :data:`PROGRAM_FILE` and only its frames are traced; one state per run of
  ``line``/``return``/``exception`` events on one line. A HumanEval function is called on the stored
  argument tuple; of a ClassEval test class (``<entry>Test*``, the ``test_index``-th) ``setUp`` runs
  before tracing starts, then its first ``test*`` method runs traced. Per probe ``(line, var)``:
  ``covered`` (the line is in the trace, REval-C), ``next`` (the lines of the states after each visit,
  -1 after the last state, ``[-1]`` for a line not run: REval-P) and ``values`` (REval's
  ``VarInterpreter`` on the locals of the state after each visit: names, attributes, subscripts, tuples
  over every combination; None (Nil) when not run or nothing is found; each value as plain data by
  :func:`_describe`: REval-S). REval deep-copies all locals; here only the names a probe reads. The
  record also holds the shown test input, the ``setUp`` source and the number of test classes
  (``cross_check``), and a function's output.
* ``answer``: REval-CO. The answer, already made a method ``dreval_output_pred`` of the test class
  (``reval_answers.answer_source``), runs after ``setUp``; True when it raises nothing.

Python 3.11 reports a line event at the def line of some functions as they start (before a folded
``"%s %s" % (a, b)``); the tracer drops a frame's first event there, as 3.10 (REval's) never reports one.
"""

from __future__ import annotations

import ast
import copy
import itertools
import re
import sys
from collections.abc import Iterator
from typing import Any

from codethinker.sandbox import register_runner

PROGRAM_FILE = "<internals>"  # REval's filename of the program under test: only its frames are traced
TEST_FILE = "<reval-test>"  # the unittest source (a name inspect reads through linecache)
STUB = "def codethinker_reval_():\n    pass\n"  # the sandbox job's entry; the runner compiles the program
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_SKIPPED = ("module", "function", "builtin_function_or_method")  # dynamics.local_trace leaves these out


# --------------------------------------------------------------------------- sandbox side
class _States:
    """``dynamics.States``: a new state whenever an event's line differs from the last state's."""

    def __init__(self, watch: dict[int, set[str]]) -> None:
        self.lines: list[int] = []
        self.snaps: dict[int, dict[str, Any]] = {}  # state index -> locals (where a probe reads them)
        self.watch = watch

    def event(self, frame: Any, event: str) -> None:
        line, lines = frame.f_lineno, self.lines
        if not lines or lines[-1] != line:
            lines.append(line)
        if event == "line":  # the state's locals: those of its last line event
            names = self.watch.get(line, set()) | (self.watch.get(lines[-2], set()) if len(lines) > 1 else set())
            if names:
                self.snaps[len(lines) - 1] = _snapshot(frame.f_locals, names)

    def after(self, line: int) -> list[dict[str, Any]]:
        """``get_states_after``: the state after each visit of ``line`` (the last state: itself)."""
        n = len(self.lines)
        return [self.snaps.get(i + 1 if i + 1 < n else i, {}) for i, x in enumerate(self.lines) if x == line]

    def next_lines(self, line: int) -> list[int]:
        n = len(self.lines)
        return sorted({self.lines[i + 1] if i + 1 < n else -1 for i, x in enumerate(self.lines) if x == line} or {-1})


def _snapshot(f_locals: dict[str, Any], names: set[str]) -> dict[str, Any]:
    out = {}
    for k in names & f_locals.keys():
        v = f_locals[k]
        if type(v).__name__ not in _SKIPPED and not isinstance(v, Iterator):  # generators are iterators
            out[k] = copy.deepcopy(v)
    return out


def _def_heads(code: str) -> set[int]:
    """Lines of def statements (and decorators) that hold no body: Python 3.11 may report a line event
    there as the function starts (its RESUME, e.g. before a folded ``"%s" % (a, b)``); 3.10 never does."""
    heads = set()
    for n in ast.walk(ast.parse(code)):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            heads.update(x for x in (n.lineno, *(d.lineno for d in n.decorator_list)) if x < n.body[0].lineno)
    return heads


def _traced(states: _States, heads: set[int], fn: Any, *args: Any) -> Any:
    """``dynamics.Sandbox.run``: ``fn(*args)`` with every frame of the program traced; a frame's first
    event is dropped when it is a line event at a def head (as Python <= 3.10 reports, REval's)."""

    def start(frame: Any, event: str, arg: Any) -> Any:
        if event != "call" or frame.f_code.co_filename != PROGRAM_FILE:
            return None
        first = [True]

        def local(frame: Any, event: str, arg: Any) -> Any:
            if first[0]:
                first[0] = False
                if event == "line" and frame.f_lineno in heads:
                    return local
            if event in ("line", "return", "exception"):
                states.event(frame, event)
            return local

        return local

    sys.settrace(start)
    try:
        return fn(*args)
    finally:
        sys.settrace(None)


def _lookup(node: ast.AST, get: Any) -> list[Any] | None:
    """``VarInterpreter._analyze_node``: every value ``node`` may denote (None: Nil); others raise."""
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, ast.Name):
        return get(node.id)
    if isinstance(node, ast.Attribute):
        objs = _lookup(node.value, get)
        return None if objs is None else [getattr(o, node.attr) for o in objs if hasattr(o, node.attr)] or None
    if isinstance(node, ast.Subscript):
        arr, idx = _lookup(node.value, get), _lookup(node.slice, get)
        if arr is None or idx is None:
            return None
        res = []
        for a, i in itertools.product(arr, idx):
            try:
                res.append(a[i])
            except (TypeError, KeyError, IndexError):
                pass
        return res or None
    if isinstance(node, ast.Tuple):
        elts = [_lookup(e, get) for e in node.elts]
        return None if any(e is None for e in elts) else list(itertools.product(*elts))
    raise TypeError(f"REval cannot interpret {type(node).__name__}")  # REval: Nil


def _state_values(states: _States, line: int, var: str) -> list[Any] | None:
    if line not in states.lines:
        return None
    after = states.after(line)
    try:
        return _lookup(ast.parse(var, mode="eval").body, lambda name: [s[name] for s in after if name in s] or None)
    except Exception:  # VarInterpreter.get: any failure is Nil
        return None


def _pure(v: Any, depth: int = 0) -> bool:
    t = type(v)
    if t in _PLAIN:
        return True
    if depth > 50 or t not in (list, tuple, set, frozenset, dict):
        return False
    return all(_pure(x, depth + 1) for x in (itertools.chain.from_iterable(v.items()) if t is dict else v))


_VIEWS: dict[str, Any] = {  # how an actual value that is no literal meets an answer of its own type
    "collections.deque": list,
    "bytearray": bytes,
    "datetime.datetime": lambda v: v.isoformat(),
    "numpy.ndarray": lambda v: v.tolist(),
    "numpy.float64": lambda v: v.item(),
    "type": lambda v: v.__name__ if v.__module__ == "builtins" else None,
}


def _describe(v: Any) -> dict[str, Any]:
    """An actual value as plain data: its type as REval names it, and ``plain``: the value itself when it
    is builtin literal data (``exact``), else its view in :data:`_VIEWS` (or None)."""
    t = type(v)
    key = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    exact, plain = _pure(v), None
    if exact:
        plain = v
    elif key in _VIEWS:
        try:
            plain = _VIEWS[key](v)
        except Exception:
            plain = None
        plain = plain if _pure(plain) else None
    try:
        text = repr(v)[:300]
    except Exception:
        text = f"<{key}>"
    return {"type": key, "exact": exact, "plain": plain, "repr": text}


def safe_repr(v: Any) -> str:
    try:
        return repr(v)
    except ValueError:  # holds an int past the digit limit: a key of its own
        return f"<unprintable {id(v)}>"


def _names(var: str) -> set[str]:
    try:
        return {n.id for n in ast.walk(ast.parse(var, mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()


def _test_class(g: dict[str, Any], opt: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``create_test_classes`` + ``tcls_postprocess``: the unittest classes ``<class>Test*`` in definition
    order; of the chosen one its first ``test*`` method, that method's body as REval shows it
    (``__input__``) and the source of its own ``setUp`` ("" for unittest's)."""
    import inspect
    import linecache
    import unittest

    test = opt["test"]
    linecache.cache[TEST_FILE] = (len(test), None, test.splitlines(True), TEST_FILE)
    exec(compile(test, TEST_FILE, "exec"), g)
    pattern = f"{opt['entry']}Test.*"
    classes = [v for k, v in list(g.items()) if isinstance(v, type) and re.match(pattern, k)]
    classes = [c for c in classes if issubclass(c, unittest.TestCase)]
    cls = classes[opt["test_index"]]
    method = next(k for k in cls.__dict__ if k.startswith("test"))
    lines = inspect.getsourcelines(getattr(cls, method))[0]
    shown = "".join(x.replace("self.assert", "assert").lstrip() for x in lines[1:])
    setup = "" if cls.setUp is unittest.TestCase.setUp else inspect.getsource(cls.setUp)
    return cls, {"n_classes": len(classes), "method": method, "shown": shown, "setup": setup}


def _run_truth(g: dict[str, Any], opt: dict[str, Any]) -> dict[str, Any]:
    watch: dict[int, set[str]] = {}
    for line, var in opt["probes"]:
        watch.setdefault(line, set()).update(_names(var))
    states, info, heads = _States(watch), {}, _def_heads(opt["code"])
    exec(compile(opt["code"], PROGRAM_FILE, "exec"), g)
    if opt.get("test") is None:
        args = eval(compile(opt["input"], "<reval-input>", "eval"), {"__builtins__": g["__builtins__"]})
        info["output"] = _describe(_traced(states, heads, g[opt["entry"]], *args))
    else:
        cls, info = _test_class(g, opt)
        obj = cls()
        obj.setUp()  # REval runs setUp before it starts tracing
        _traced(states, heads, getattr(obj, info["method"]))
    probes = []
    for line, var in opt["probes"]:
        values = _state_values(states, line, var)
        distinct = {
            (d["type"], safe_repr(d["plain"]) if d["exact"] else d["repr"]): d for d in map(_describe, values or ())
        }
        probes.append({"covered": line in states.lines, "next": states.next_lines(line)})
        probes[-1]["values"] = None if values is None else list(distinct.values())
    return {**info, "n_states": len(states.lines), "probes": probes}


def _run_answer(g: dict[str, Any], opt: dict[str, Any]) -> bool:
    """REval-CO: the answer, a method of the test class, runs after ``setUp`` without an exception."""
    exec(compile(opt["code"], PROGRAM_FILE, "exec"), g)
    cls, _ = _test_class(g, opt)
    exec(compile(opt["answer"], "<answer>", "exec"), g)
    cls.dreval_output_pred = g["dreval_output_pred"]
    obj = cls()
    obj.setUp()
    obj.dreval_output_pred()
    return True


def reval_runner(fn: Any, args: tuple, kwargs: dict, options: dict) -> Any:
    """The sandbox's ``"reval"`` runner (``options["mode"]``: ``truth`` or ``answer``)."""
    g = {"__builtins__": fn.__globals__["__builtins__"], "__name__": "dynamics"}
    return (_run_answer if options["mode"] == "answer" else _run_truth)(g, options)


register_runner("reval", "codethinker.evaluation.reval_runner:reval_runner")
