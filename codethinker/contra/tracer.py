"""Ground-truth ConTra flows: run ``f`` in the sandbox and record LOCALS at every block exit.

The flow (SPEC §3) is the blocks in source order ending with the block in which ``f``
returned; a block that did not run keeps the previous locals. LOCALS are ``f``'s own
variables (the outermost call only; recursive and helper calls run inside a block), in
canonical literal form, with variables that have none left out.

The truth JSON (``Flow.to_json``, also ``codethinker trace --json``) is the format every
later stage carries; rewards read it and never execute code::

    {"version": 1, "entry": "f", "input": "[1, 2]", "code": "<normalized source>",
     "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{'nums': [1, 2]}"}, ...],
     "output": "3"}

>>> from codethinker.sandbox import Sandbox
>>> with Sandbox() as sb:  # doctest: +SKIP
...     out = trace("def f(x):\\n    y = x + 1\\n    return y", "1", sandbox=sb)
>>> out.flow.output  # doctest: +SKIP
2
"""

from __future__ import annotations

import ast
import bisect
import functools
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from codethinker.contra import _guard
from codethinker.contra.blocks import split_blocks
from codethinker.contra.normalize import NormalizeError, normalize_source
from codethinker.contra.values import NoLiteral, canonicalize, literal_repr, parse_call_args, parse_literal
from codethinker.sandbox import register_runner

__all__ = ["Block", "Flow", "TraceOutcome", "runner_result_problem", "trace", "trace_many", "trace_runner"]

TRUTH_VERSION = 1


@dataclass(frozen=True)
class Block:
    start: int
    end: int
    weight: int
    locals: dict[str, Any]
    locals_text: str  # repr of ``locals`` as stored in the truth JSON


@dataclass(frozen=True)
class Flow:
    entry: str
    input: str  # argument text as inside ``f(...)``
    lines: tuple[str, ...]  # normalized program, LINENO i = lines[i]
    blocks: tuple[Block, ...]
    output: Any
    output_text: str

    def block_code(self, i: int) -> tuple[str, ...]:
        b = self.blocks[i]
        return self.lines[b.start : b.end + 1]

    @property
    def weights(self) -> list[int]:
        return [b.weight for b in self.blocks]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": TRUTH_VERSION,
            "entry": self.entry,
            "input": self.input,
            "code": "\n".join(self.lines) + "\n",
            "blocks": [
                {"start": b.start, "end": b.end, "weight": b.weight, "locals": b.locals_text} for b in self.blocks
            ],
            "output": self.output_text,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @staticmethod
    def from_json(text: str) -> Flow:
        """Parse truth JSON (cached: rewards call this once per rollout)."""
        return _flow_from_json(text)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Flow:
        return _flow_from_json(json.dumps(d))


def _field(d: Any, key: str, typ: type, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{where}: missing field '{key}'")
    value = d[key]
    if type(value) is not typ:
        raise ValueError(f"{where}: field '{key}' must be {typ.__name__}, got {type(value).__name__}")
    return value


@functools.lru_cache(maxsize=8192)
def _flow_from_json(text: str) -> Flow:
    try:
        d = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a ConTra truth JSON: {exc}") from None
    where = "truth JSON"
    lines = tuple(_field(d, "code", str, where).rstrip("\n").split("\n"))
    blocks, next_line = [], 0
    for i, b in enumerate(_field(d, "blocks", list, where)):
        at = f"{where} blocks[{i}]"
        start, end, weight = (_field(b, k, int, at) for k in ("start", "end", "weight"))
        if start != next_line or end < start or end >= len(lines) or weight < 1:
            raise ValueError(f"{at}: needs start == {next_line}, start <= end < {len(lines)}, weight >= 1")
        loc_text = _field(b, "locals", str, at)
        loc = parse_literal(loc_text)
        if type(loc) is not dict:
            raise ValueError(f"{at}: 'locals' must be a dict literal")
        blocks.append(Block(start, end, weight, loc, loc_text))
        next_line = end + 1
    if not blocks:
        raise ValueError(f"{where}: no blocks")
    entry, input_text = _field(d, "entry", str, where), _field(d, "input", str, where)
    if not entry.isidentifier() or "\n" in input_text:
        raise ValueError(f"{where}: 'entry' must be a name and 'input' one line")
    out_text = _field(d, "output", str, where)
    return Flow(entry, input_text, lines, tuple(blocks), parse_literal(out_text), out_text)


@dataclass(frozen=True)
class TraceOutcome:
    flow: Flow | None
    reason: str | None = None  # why the sample could not be traced

    @property
    def ok(self) -> bool:
        return self.flow is not None


# --------------------------------------------------------------------------- worker side
def _snapshot(
    f_locals: dict[str, Any], _canon: Callable[..., Any] = canonicalize, _no_literal: type = NoLiteral
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in f_locals.items():
        try:
            out[k] = _canon(v)
        except _no_literal:
            continue
    return out


def _guarded_modules() -> list[Any]:
    import builtins
    import collections
    import math

    from codethinker.contra import values

    return [sys.modules[__name__], _guard, values, bisect, math, collections, builtins]


def prepare_process() -> None:
    """Called by the sandbox in a trace job's process after its lock-down, before any user code:
    installs the tracer's guard there and arms it, so the sample's module-level code already runs
    under its refusals (frames, gc, ctypes, memory-access imports, files of /proc: nothing that
    could read the job's key or the tracer's records), and the guard's snapshot of the tracer's
    modules is taken before user code exists (``trace_runner`` installs it itself, lazily,
    unarmed, where nothing called this)."""
    _guard.install(trace_runner.__code__, _guarded_modules())
    _guard.arm()


def _block_recorder(
    code: Any,
    starts: tuple[int, ...],
    exits: list[dict[str, Any]],
    state: dict[str, Any],
    check: Callable[[], None],
    _helpers: tuple = (_snapshot, bisect.bisect_right, max, range),
) -> Callable[..., Any]:
    """The trace function of :func:`trace_runner`: it follows the first call of ``code`` only and, at
    every block exit, appends the frame's locals to ``exits`` (a skipped block keeps the same locals);
    ``state`` holds that frame, its block, whether it returned, and a lost line event. Its closures
    read only what is bound here (defaults and arguments), never a module global."""
    snapshot, bisect_right, max_, range_ = _helpers

    def block_of(lineno: int) -> int:
        return max_(0, bisect_right(starts, lineno - 1) - 1)

    def local(frame: Any, event: str, arg: Any) -> Any:
        if frame is not state["frame"]:
            return None
        if event == "line":
            b = block_of(frame.f_lineno)
            cur = state["block"]
            if cur is None:
                state["block"] = b
            elif b > cur:
                check()
                snap = snapshot(frame.f_locals)
                exits.extend(snap for _ in range_(b - cur))  # skipped blocks keep the same locals
                state["block"] = b
        elif event == "return":
            if state["block"] is None:
                state["block"] = 0
            elif block_of(frame.f_lineno) != state["block"] and state["lost"] is None:
                state["lost"] = f"line events lost: returned from line {frame.f_lineno} in block {state['block']}"
            check()
            exits.append(snapshot(frame.f_locals))
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
    *,
    _guard_fns: tuple = (_guard.install, _guard.begin, _guard.end, _guard.check, _guard.TraceTampered),
    _helpers: tuple = (_block_recorder, canonicalize),
) -> dict[str, Any]:
    """Run inside the sandbox worker: call ``fn`` under ``sys.settrace`` and record block exits.

    ``options["starts"]`` holds the 0-based first line of every block. Returns plain data:
    ``{"value": canonical return value, "exits": [locals after block 0, 1, ...]}``. The call runs
    under :mod:`codethinker.contra._guard`: a sample that touches the tracer's hooks raises
    :class:`~codethinker.contra._guard.TraceTampered` here (an untraceable sample, never a truth).
    Everything used while ``fn`` runs is bound as a default (module globals can be patched at run time).
    """
    install, begin, end, check, tampered = _guard_fns
    block_recorder, canon = _helpers
    install(trace_runner.__code__, _guarded_modules())
    starts: tuple[int, ...] = tuple(options["starts"])
    if options.get("args_fn"):  # non-literal benchmark inputs, evaluated here inside the sandbox
        args, kwargs = fn.__globals__[options["args_fn"]]()
    exits: list[dict[str, Any]] = []
    state: dict[str, Any] = {"frame": None, "block": None, "returned": False, "lost": None}
    global_trace = block_recorder(fn.__code__, starts, exits, state, check)
    begin(global_trace, globals())
    try:
        value = fn(*args, **kwargs)
    except BaseException:
        try:
            end()
        except tampered:
            pass  # the sample's own error is the result: no truth either way
        raise
    end()  # raises TraceTampered if the sample touched the tracer
    if not state["returned"] or state["lost"] is not None:
        raise tampered(state["lost"] or "the traced function's return was not seen")
    return {"value": canon(value), "exits": exits}


register_runner("trace", "codethinker.contra.tracer:trace_runner")


# --------------------------------------------------------------------------- parent side
ARGS_FN = "codethinker_input_"


def _one_line(args: tuple, kwargs: dict) -> str:
    return ", ".join([*(literal_repr(a) for a in args), *(f"{k}={literal_repr(v)}" for k, v in kwargs.items())])


def _prepare(source: str, args_text: str, entry: str) -> tuple[Any, Any, tuple, dict, str | None, str]:
    """Normalize and split; parse literal arguments, or mark expression arguments (some benchmark
    inputs, e.g. CRUXEval's ``''.join(['A'] * 20)``) for evaluation inside the sandbox. The last
    item is the input as shown in RETURN: always one line."""
    prog = normalize_source(source, entry)
    specs = split_blocks(prog)
    try:
        args, kwargs = parse_call_args(args_text)
        shown = args_text.strip() if "\n" not in args_text else _one_line(args, kwargs)
        return prog, specs, args, kwargs, None, shown
    except ValueError:
        try:
            call = ast.parse(f"_f({args_text})", mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            raise ValueError(f"input is not valid Python argument text: {exc}") from None
        if not isinstance(call, ast.Call) or "\n" in args_text:
            raise ValueError("input is not a plain argument list") from None
        wrapper = f"\n\ndef {ARGS_FN}():\n    return (lambda *a, **k: (a, k))({args_text})\n"
        return prog, specs, (), {}, prog.text + wrapper, args_text.strip()


def trace_many(
    items: Iterable[tuple[str, str, str]],
    *,
    sandbox: Any = None,
    sandbox_config: Any = None,
    progress: bool | str = False,
) -> list[TraceOutcome]:
    """Trace ``(source, args_text, entry)`` items in parallel; one outcome per item, in order."""
    from codethinker.sandbox import Job, Sandbox

    items = list(items)
    outcomes: list[TraceOutcome | None] = [None] * len(items)
    jobs: list[Job] = []
    pending: list[tuple[int, Any, Any, str]] = []
    for i, (source, args_text, entry) in enumerate(items):
        try:
            prog, specs, args, kwargs, expr_source, shown = _prepare(source, args_text, entry)
        except (NormalizeError, ValueError) as exc:
            outcomes[i] = TraceOutcome(None, f"bad program or input: {exc}")
            continue
        options: dict[str, Any] = {"starts": [s.start for s in specs]}
        if expr_source is not None:
            options["args_fn"] = ARGS_FN
        job_source = expr_source or prog.text
        jobs.append(Job(source=job_source, args=args, kwargs=kwargs, entry=entry, runner="trace", options=options))
        pending.append((i, prog, specs, shown))
    own = sandbox is None
    sb = Sandbox(sandbox_config) if own else sandbox
    try:
        results = sb.map(jobs, progress=progress) if jobs else []
    finally:
        if own:
            sb.close()
    for (i, prog, specs, shown), res in zip(pending, results, strict=True):
        outcomes[i] = _build(prog, specs, shown, res)
    return [o for o in outcomes if o is not None]


def trace(source: str, args_text: str, entry: str = "f", *, sandbox: Any = None) -> TraceOutcome:
    """Trace one sample (see :func:`trace_many`)."""
    return trace_many([(source, args_text, entry)], sandbox=sandbox)[0]


MAX_RESULT_ITEMS = 1_000_000  # locals per block, a bound on what a forged frame can make the parent walk


def runner_result_problem(value: Any, n_blocks: int) -> str | None:
    """Why a trace runner's result (as decoded from the child's frame) has the wrong shape, or None.

    A pure function of plain data. The shape is ``{"value": any, "exits": [dict, ...]}`` with
    1 to ``n_blocks`` exits whose keys are identifiers (a compromised child may send anything).
    """
    if type(value) is not dict or set(value) != {"value", "exits"}:
        return "result is not a dict with keys 'value' and 'exits'"
    exits = value["exits"]
    if type(exits) is not list:
        return f"'exits' is a {type(exits).__name__}, not a list"
    if not exits or len(exits) > n_blocks:
        return f"tracer saw {len(exits)} block exits for {n_blocks} blocks"
    for i, loc in enumerate(exits):
        if type(loc) is not dict or len(loc) > MAX_RESULT_ITEMS:
            return f"exits[{i}] is not a dict of locals"
        if not all(type(k) is str and k.isidentifier() for k in loc):
            return f"exits[{i}] has a key that is not a variable name"
    return None


def _build(prog: Any, specs: list, args_text: str, res: Any) -> TraceOutcome:
    """One sample's outcome from its sandbox result; never raises (a forged result is that sample's error)."""
    try:
        return _build_checked(prog, specs, args_text, res)
    except Exception as exc:  # whatever a forged frame does, the batch keeps its other samples
        return TraceOutcome(None, f"malformed runner result: {type(exc).__name__}")


def _build_checked(prog: Any, specs: list, args_text: str, res: Any) -> TraceOutcome:
    if res.status != "ok":
        if res.error_type == "TraceTampered":
            return TraceOutcome(None, f"untraceable: the sample tampered with the tracer ({res.error_message})")
        detail = f"{res.error_type}: {res.error_message}" if res.status == "error" else res.status
        if res.error_type == "NoLiteral":
            return TraceOutcome(None, f"output has no literal form ({res.error_message})")
        return TraceOutcome(None, f"{res.status}: {detail}" if res.status == "error" else res.status)
    problem = runner_result_problem(res.value, len(specs))
    if problem is not None:
        return TraceOutcome(
            None, problem if problem.startswith("tracer saw") else f"malformed runner result: {problem}"
        )
    exits = res.value["exits"]
    blocks = []
    for spec, loc in zip(specs, exits, strict=False):
        try:
            text = literal_repr(loc)
        except NoLiteral as exc:
            return TraceOutcome(None, f"locals have no literal form ({exc})")
        blocks.append(Block(spec.start, spec.end, spec.weight, loc, text))
    try:
        out_text = literal_repr(res.value["value"])
    except NoLiteral as exc:
        return TraceOutcome(None, f"output has no literal form ({exc})")
    flow = Flow(prog.entry, args_text, prog.lines, tuple(blocks), res.value["value"], out_text)
    return TraceOutcome(flow)
