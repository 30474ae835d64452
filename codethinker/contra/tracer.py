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

from codethinker.contra.blocks import split_blocks
from codethinker.contra.normalize import NormalizeError, normalize_source
from codethinker.contra.values import NoLiteral, canonicalize, literal_repr, parse_call_args, parse_literal

__all__ = ["Block", "Flow", "TraceOutcome", "trace", "trace_many", "trace_runner"]

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
def _snapshot(f_locals: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in f_locals.items():
        try:
            out[k] = canonicalize(v)
        except NoLiteral:
            continue
    return out


def trace_runner(fn: Callable[..., Any], args: tuple, kwargs: dict, options: dict) -> dict[str, Any]:
    """Run inside the sandbox worker: call ``fn`` under ``sys.settrace`` and record block exits.

    ``options["starts"]`` holds the 0-based first line of every block. Returns plain data:
    ``{"value": canonical return value, "exits": [locals after block 0, 1, ...]}``.
    """
    starts: list[int] = list(options["starts"])
    if options.get("args_fn"):  # non-literal benchmark inputs, evaluated here inside the sandbox
        args, kwargs = fn.__globals__[options["args_fn"]]()
    code = fn.__code__
    exits: list[dict[str, Any]] = []
    state: dict[str, Any] = {"frame": None, "block": None}

    def block_of(lineno: int) -> int:
        return max(0, bisect.bisect_right(starts, lineno - 1) - 1)

    def local(frame: Any, event: str, arg: Any) -> Any:
        if frame is not state["frame"]:
            return None
        if event == "line":
            b = block_of(frame.f_lineno)
            cur = state["block"]
            if cur is None:
                state["block"] = b
            elif b > cur:
                snap = _snapshot(frame.f_locals)
                exits.extend(snap for _ in range(b - cur))  # skipped blocks keep the same locals
                state["block"] = b
        elif event == "return":
            if state["block"] is None:
                state["block"] = 0
            exits.append(_snapshot(frame.f_locals))
        return local

    def global_trace(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and state["frame"] is None and frame.f_code is code:
            state["frame"] = frame
            return local
        return None

    old = sys.gettrace()
    sys.settrace(global_trace)
    try:
        value = fn(*args, **kwargs)
    finally:
        sys.settrace(old)
    return {"value": canonicalize(value), "exits": exits}


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


def _build(prog: Any, specs: list, args_text: str, res: Any) -> TraceOutcome:
    if res.status != "ok":
        detail = f"{res.error_type}: {res.error_message}" if res.status == "error" else res.status
        if res.error_type == "NoLiteral":
            return TraceOutcome(None, f"output has no literal form ({res.error_message})")
        return TraceOutcome(None, f"{res.status}: {detail}" if res.status == "error" else res.status)
    exits = res.value["exits"]
    if not exits or len(exits) > len(specs):
        return TraceOutcome(None, f"tracer saw {len(exits)} block exits for {len(specs)} blocks")
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
