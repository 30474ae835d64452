"""Ground-truth ConTra flows: run ``f`` in the sandbox and record LOCALS at every block exit.

The flow (SPEC §3) is the blocks in source order ending with the block in which ``f``
returned; a block that did not run keeps the previous locals. LOCALS are ``f``'s own
variables (the outermost call only; recursive and helper calls run inside a block), in
canonical literal form, with variables that have none left out. This module is the parent's
side (the API, the truth JSON, the checks on what a sandbox sends back); the runner that records
the flow in the sandbox is :mod:`codethinker.contra.trace_worker`.

The parent trusts nothing the sample's process sends: a result becomes a flow only if its shape
is right (:func:`runner_result_problem`) and its last block is one where ``f`` can return (a block
holding a ``return``, or the last block): a shorter flow is untraceable. The function under test
must be the given ``def`` itself: a decorated entry is untraceable here, and the worker checks that
the function it traces is the one the given source's ``def`` made (``Job.entry_def``).

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
import collections
import functools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from codethinker.contra.blocks import split_blocks
from codethinker.contra.normalize import Normalized, NormalizeError, find_entry, normalize_source
from codethinker.contra.trace_worker import prepare_process, trace_runner
from codethinker.contra.values import NoLiteral, literal_repr, parse_call_args, parse_literal
from codethinker.sandbox import register_runner

__all__ = [
    "Block",
    "Flow",
    "TraceOutcome",
    "prepare_process",
    "runner_result_problem",
    "trace",
    "trace_iter",
    "trace_many",
    "trace_runner",
]

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


register_runner("trace", "codethinker.contra.tracer:trace_runner")  # the zygote imports this module

# --------------------------------------------------------------------------- parent side
ARGS_FN = "codethinker_input_"


def _one_line(args: tuple, kwargs: dict) -> str:
    return ", ".join([*(literal_repr(a) for a in args), *(f"{k}={literal_repr(v)}" for k, v in kwargs.items())])


def _prepare(source: str, args_text: str, entry: str) -> tuple[Any, Any, tuple, dict, str | None, str]:
    """Normalize and split; parse literal arguments, or mark expression arguments (some benchmark
    inputs, e.g. CRUXEval's ``''.join(['A'] * 20)``) for evaluation inside the sandbox. The last
    item is the input as shown in RETURN: always one line."""
    prog = normalize_source(source, entry)
    if find_entry(ast.parse(prog.text), entry).decorator_list:
        raise ValueError(f"the function under test '{entry}' is decorated: its call would not run the given def")
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


def trace_iter(
    items: Iterable[tuple[str, str, str]],
    *,
    sandbox: Any = None,
    sandbox_config: Any = None,
    progress: bool | str = False,
    total: int | None = None,
) -> Iterator[TraceOutcome]:
    """Trace ``(source, args_text, entry)`` items in parallel; one outcome per item, in order, each
    yielded as soon as it and the ones before it are done. ``items`` is read as the workers need
    it and nothing is kept of an outcome once yielded, so memory does not grow with the input.
    ``progress``/``total``: the sandbox's bar and its count (the items, when known)."""
    from codethinker.sandbox import Job, Sandbox

    pending: collections.deque[TraceOutcome | tuple[Any, Any, str]] = collections.deque()

    def jobs() -> Iterator[Any]:
        for source, args_text, entry in items:
            try:
                prog, specs, args, kwargs, expr_source, shown = _prepare(source, args_text, entry)
            except (NormalizeError, ValueError) as exc:
                pending.append(TraceOutcome(None, f"bad program or input: {exc}"))
                continue
            options: dict[str, Any] = {"starts": [s.start for s in specs]}
            if expr_source is not None:
                options["args_fn"] = ARGS_FN
            pending.append((prog, specs, shown))
            job_source = expr_source or prog.text
            yield Job(job_source, args, kwargs, entry, runner="trace", options=options, entry_def=True)

    own = sandbox is None
    sb = Sandbox(sandbox_config) if own else sandbox
    try:
        for res in sb.imap(jobs(), progress=progress, total=total):
            while isinstance(pending[0], TraceOutcome):
                yield pending.popleft()  # type: ignore[misc]
            prog, specs, shown = pending.popleft()  # type: ignore[misc]
            yield _build(prog, specs, shown, res)
        while pending:
            yield pending.popleft()  # type: ignore[misc]
    finally:
        if own:
            sb.close()


def trace_many(
    items: Iterable[tuple[str, str, str]],
    *,
    sandbox: Any = None,
    sandbox_config: Any = None,
    progress: bool | str = False,
) -> list[TraceOutcome]:
    """Trace ``(source, args_text, entry)`` items in parallel; one outcome per item, in order (the
    list of :func:`trace_iter`, which a caller that writes outcomes as they come should use)."""
    return list(trace_iter(items, sandbox=sandbox, sandbox_config=sandbox_config, progress=progress))


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


@functools.lru_cache(maxsize=4096)
def _end_blocks(prog: Normalized) -> frozenset[int]:
    """The blocks a flow may end with: those holding a ``return`` of the entry function (not one of a
    nested function, lambda or class), and the last block (falling off its end)."""
    fn = find_entry(ast.parse(prog.text), prog.entry)
    specs = split_blocks(prog)
    ends = {len(specs) - 1}
    for stmt in fn.body:
        stack: list[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Return):
                line = stmt.lineno - 1
                ends.update(i for i, b in enumerate(specs) if b.start <= line <= b.end)
                break
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                stack.extend(ast.iter_child_nodes(node))
    return frozenset(ends)


def _build_checked(prog: Any, specs: list, args_text: str, res: Any) -> TraceOutcome:
    if res.status != "ok":
        if res.error_type == "TraceTampered":
            return TraceOutcome(None, f"untraceable: the sample tampered with the tracer ({res.error_message})")
        if res.error_type == "EntryReplaced":
            return TraceOutcome(None, f"untraceable: the traced function is not the given def ({res.error_message})")
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
    if len(exits) - 1 not in _end_blocks(prog):
        return TraceOutcome(
            None, f"untraceable: a flow of {len(exits)} blocks ends in a block where the function cannot return"
        )
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
