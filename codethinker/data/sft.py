"""ConTra SFT extraction: teacher thoughts, rejection sampling, the SFT/GRPO split, verl records.

The teacher fills in only the ``[THOUGHT]`` parts of the ground-truth skeleton; a trace is
kept only if it validates (SPEC §3), every block's LOCALS equal the truth and the RETURN
literal equals the true output (type-strict). Teachers:

- ``template`` (offline default): thoughts written from the trace itself: the call, which
  branch an ``if`` took (when its test can be read off the locals), how many times a ``for``
  loop ran (when its iterable is known), and what each block changed;
- ``llm``: an OpenAI-compatible chat model answers :func:`teacher_prompt`.

Samples are split evenly (by sample count) into an SFT half and a GRPO half **by function**:
no function has samples in both.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from codethinker.contra.render import (
    THOUGHT_PLACEHOLDER,
    TRACE_CLOSE,
    TRACE_OPEN,
    render_prompt,
    render_trace,
    skeleton,
)
from codethinker.contra.tracer import Flow
from codethinker.contra.validate import validate
from codethinker.contra.values import stable_repr, strict_equal
from codethinker.data.synth import sample_source

__all__ = [
    "check_trace",
    "count_reasons",
    "extract_trace",
    "extract_traces",
    "grpo_record",
    "sft_record",
    "split_by_function",
    "teacher_prompt",
    "template_thoughts",
    "template_trace",
]


# --------------------------------------------------------------------------- template teacher
def _short(v: Any, limit: int = 60) -> str:
    text = stable_repr(v)
    if len(text) <= limit:
        return text
    if isinstance(v, list | tuple | set | dict | str):
        return f"a {type(v).__name__} of length {len(v)}"
    return text[: limit - 3] + "..."


_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mod: lambda a, b: a % b,
    ast.FloorDiv: lambda a, b: a // b,
}
_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


class _Unknown(Exception):
    pass


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate a small pure expression over literal locals (names, constants, len, + - % //,
    comparisons, not/and/or, subscripts); anything else is unknown. No program code runs."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _eval(node.left, env), _eval(node.right, env)
        if not all(type(x) is int for x in (a, b)):
            raise _Unknown
        try:
            return _OPS[type(node.op)](a, b)
        except ZeroDivisionError:
            raise _Unknown from None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _eval(node.operand, env)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _eval(node.operand, env)
        if type(v) not in (int, float):
            raise _Unknown
        return -v
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, env) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env)
            try:
                if not _CMP[type(op)](left, right):
                    return False
            except TypeError:
                raise _Unknown from None
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1:
        v = _eval(node.args[0], env)
        if not isinstance(v, list | tuple | str | dict | set):
            raise _Unknown
        return len(v)
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        container, key = _eval(node.value, env), _eval(node.slice, env)
        try:
            return container[key]
        except (IndexError, KeyError, TypeError):
            raise _Unknown from None
    raise _Unknown


def _loop_count(node: ast.For, env: dict[str, Any]) -> int | None:
    if any(isinstance(n, ast.Break | ast.Return | ast.Raise) for n in ast.walk(node)):
        return None
    it = node.iter
    try:
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords:
            args = [_eval(a, env) for a in it.args]
            if not all(type(a) is int for a in args) or not 1 <= len(args) <= 3 or (len(args) == 3 and args[2] == 0):
                return None
            return len(range(*args))
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate":
            it = it.args[0] if it.args else it
        v = _eval(it, env)
    except _Unknown:
        return None
    return len(v) if isinstance(v, list | tuple | str | dict | set) else None


def _first_line(stmt: ast.stmt, lines: tuple[str, ...]) -> str:
    return lines[stmt.lineno - 1].strip().rstrip(":")


def _describe(stmt: ast.stmt, lines: tuple[str, ...], env: dict[str, Any]) -> str:
    head = _first_line(stmt, lines)
    if isinstance(stmt, ast.For):
        k = _loop_count(stmt, env)
        times = f" runs {k} time{'s' if k != 1 else ''}" if k is not None else " runs over its iterable"
        return f"The loop `{head}`{times}."
    if isinstance(stmt, ast.While):
        return f"The loop `{head}` repeats while its condition holds."
    if isinstance(stmt, ast.If):
        try:
            taken = bool(_eval(stmt.test, env))
        except _Unknown:
            return f"The check `{head}` decides which branch runs."
        test = ast.unparse(stmt.test)
        if taken:
            return f"`{test}` is True, so the `if` branch runs."
        return f"`{test}` is False, so " + ("the `else` part runs." if stmt.orelse else "its body is skipped.")
    if isinstance(stmt, ast.Return):
        return "The function returns here."
    return ""


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    parts = []
    for k, v in after.items():
        if k not in before:
            parts.append(f"`{k}` becomes {_short(v)}")
        elif not strict_equal(before[k], v):
            parts.append(f"`{k}` changes from {_short(before[k])} to {_short(v)}")
    if not parts:
        return "No local variable changes here."
    return "After this block " + "; ".join(parts) + "."


def template_thoughts(flow: Flow) -> list[str]:
    """One thought per block, written from the ground-truth flow alone."""
    tree = ast.parse("\n".join(flow.lines) + "\n")
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == flow.entry][-1]
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
    per_block: list[list[ast.stmt]] = [[] for _ in flow.blocks]
    for stmt in fn.body:
        line = stmt.lineno - 1
        for i, b in enumerate(flow.blocks):
            if b.start <= line <= b.end:
                per_block[i].append(stmt)
    thoughts = []
    first = flow.blocks[0].locals
    env = {p: first[p] for p in params if p in first}  # the arguments as passed in
    for i, b in enumerate(flow.blocks):
        parts = []
        if i == 0:
            args = ", ".join(f"{p} = {_short(env[p])}" for p in params if p in env)
            parts.append(f"`{flow.entry}` is called with {args}." if args else f"`{flow.entry}` is called.")
        parts += [d for s in per_block[i] if (d := _describe(s, flow.lines, env))]
        parts.append(_changes(env, b.locals))
        if i == len(flow.blocks) - 1:
            parts.append(f"So `{flow.entry}` returns {_short(flow.output, 120)}.")
        thoughts.append(" ".join(parts))
        env = dict(b.locals)
    return thoughts


# --------------------------------------------------------------------------- llm teacher
TEACHER_PROMPT = """Below is a Python function, an input, and the true execution trace of the call in \
the ConTra format, with every [THOUGHT] left as "{placeholder}".

Rewrite the whole trace, replacing each placeholder with a few sentences of step-by-step \
reasoning about that block on this input (which branch runs, how many iterations, how the \
variables change), so that the LOCALS that follow it are explained. Copy every other line \
exactly as it is: the tags, the [LINENO X] lines, the LOCALS and the RETURN. Output only the \
trace, from [TRACE] to [/TRACE].

Input: {entry}({input})

{skeleton}"""


def teacher_prompt(flow: Flow) -> list[dict[str, str]]:
    text = TEACHER_PROMPT.format(
        placeholder=THOUGHT_PLACEHOLDER, entry=flow.entry, input=flow.input, skeleton=skeleton(flow)
    )
    return [{"role": "user", "content": text}]


_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.S)


def extract_trace(answer: str) -> str | None:
    """The ``[TRACE]`` ... ``[/TRACE]`` part of a teacher's answer (thinking and fences removed)."""
    lines = _THINK.sub("", answer or "").split("\n")
    starts = [i for i, ln in enumerate(lines) if ln.strip() == TRACE_OPEN]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == TRACE_CLOSE]
    if not starts or not ends or ends[-1] < starts[0]:
        return None
    return "\n".join(lines[starts[0] : ends[-1] + 1])


def check_trace(text: str, flow: Flow, require_thoughts: bool = True) -> str | None:
    """``None`` when the trace may be kept, else the rejection reason."""
    v = validate(text, flow)
    if not v.ok:
        return f"invalid_{v.reason}"
    if any(THOUGHT_PLACEHOLDER in pb.thought for pb in v.blocks):
        return "placeholder_left"
    if require_thoughts and any(not pb.thought.strip() for pb in v.blocks):
        return "empty_thought"
    for pb, tb in zip(v.blocks, flow.blocks, strict=True):
        if pb.locals is None or not strict_equal(pb.locals, tb.locals):
            return "locals_wrong"
    if not strict_equal(v.answer, flow.output):
        return "return_wrong"
    return None


def template_trace(flow: Flow) -> str:
    return render_trace(flow, template_thoughts(flow))


# --------------------------------------------------------------------------- split and records
def split_by_function(
    samples: list[dict[str, Any]], seed: int, halves: int = 2
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two halves with (nearly) equal sample counts; each function's samples go to one half.

    Functions are taken in an order fixed by a hash of (seed, task_id) and each goes to the
    half that has fewer samples so far. ``halves=1``: every sample in the first, in that order.
    """
    by_fn: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        by_fn.setdefault(s["task_id"], []).append(s)
    order = sorted(by_fn, key=lambda t: hashlib.sha256(f"{seed}\x1f{t}".encode()).digest())
    out: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for t in order:
        target = 0 if halves == 1 or len(out[0]) <= len(out[1]) else 1
        out[target].extend(by_fn[t])
    return out


def sft_record(sample: dict[str, Any], flow: Flow, trace: str, prompt: str = "instruct") -> dict[str, Any]:
    return {
        "id": sample["id"],
        "task_id": sample["task_id"],
        "source": sample_source(sample),
        "messages": [*render_prompt(flow, prompt), {"role": "assistant", "content": trace}],
    }


def grpo_record(
    sample: dict[str, Any], data_source: str, split: str, index: int, prompt: str = "instruct", heldout: str = ""
) -> dict[str, Any]:
    """One row of verl's RL parquet schema; the reward reads ``reward_model.ground_truth``. ``heldout``:
    which held-out set an evaluation row belongs to (``shape_disjoint``, ``in_distribution``, ``leetcode``)."""
    return {
        "data_source": data_source,
        "prompt": render_prompt(Flow.from_json(sample["truth"]), prompt),
        "ability": "code_reasoning",
        "reward_model": {"style": "rule", "ground_truth": sample["truth"]},
        "extra_info": {
            "id": sample["id"],
            "task_id": sample["task_id"],
            "source": sample_source(sample),
            "split": split,
            "index": index,
            "heldout": heldout,
        },
    }


def count_reasons(reasons: list[str | None]) -> dict[str, int]:
    return dict(Counter(r for r in reasons if r is not None).most_common())


def extract_traces(
    flows: list[Flow], *, teacher: str, clients: list[Any] | None = None
) -> tuple[list[str | None], Counter[str]]:
    """Rejection sampling: one kept trace (or ``None``) per flow, and rejections by reason.

    ``template``: one attempt each. ``none``: the trace with empty ``[THOUGHT]`` blocks (code,
    LOCALS and RETURN only: the shortest rows, for a policy trained from scratch). ``llm``: one
    attempt per client in ``clients`` (clients differ in their sampling seed), stopping for a
    flow at its first kept trace.
    """
    rejected: Counter[str] = Counter()
    kept: list[str | None] = [None] * len(flows)
    if teacher in ("template", "none"):
        for i, flow in enumerate(flows):
            text = template_trace(flow) if teacher == "template" else render_trace(flow)
            reason = check_trace(text, flow, require_thoughts=teacher == "template")
            if reason is None:
                kept[i] = text
            else:
                rejected[reason] += 1
        return kept, rejected
    if teacher != "llm":
        raise ValueError(f"contra_sft.teacher must be 'template', 'none' or 'llm', got {teacher!r}")
    if not clients:
        raise ValueError("the llm teacher needs at least one ChatClient")
    for client in clients:
        todo = [i for i, t in enumerate(kept) if t is None]
        if not todo:
            break
        answers = client.complete_many([teacher_prompt(flows[i]) for i in todo])
        for i, answer in zip(todo, answers, strict=True):
            if answer is None:
                rejected["request_failed"] += 1
                continue
            text = extract_trace(answer)
            reason = "no_trace" if text is None else check_trace(text, flows[i])
            if reason is None:
                kept[i] = text
            else:
                rejected[reason] += 1
    return kept, rejected
