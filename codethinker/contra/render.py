"""Flow -> ConTra text: the trace, the teacher's skeleton, and the zero-shot prompt (SPEC §3).

>>> from codethinker.contra.tracer import Flow
>>> flow = Flow.from_json('{"entry": "f", "input": "1", "code": "def f(x):\\\\n    return x\\\\n",'
...     ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{\\'x\\': 1}"}], "output": "1"}')
>>> print(render_trace(flow, ["x is 1."]))
[TRACE]
[CODE]
[LINENO 0]    def f(x):
[LINENO 1]        return x
[/CODE]
[THOUGHT]
x is 1.
[/THOUGHT]
[LOCALS]
{'x': 1}
[/LOCALS]
[RETURN]
assert f(1) == 1
[/RETURN]
[/TRACE]
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from codethinker.contra.tracer import Flow
from codethinker.contra.values import NoLiteral, literal_repr, parse_call_args

__all__ = [
    "ANSWER_CLOSE",
    "ANSWER_OPEN",
    "CODE_CLOSE",
    "CODE_OPEN",
    "LOCALS_CLOSE",
    "LOCALS_OPEN",
    "PROMPT_STYLES",
    "RETURN_CLOSE",
    "RETURN_OPEN",
    "TAGS",
    "THOUGHT_CLOSE",
    "THOUGHT_OPEN",
    "THOUGHT_PLACEHOLDER",
    "TRACE_CLOSE",
    "TRACE_OPEN",
    "last_group",
    "render_prompt",
    "render_trace",
    "skeleton",
    "vanilla_prompt",
]


TAGS = (
    "[TRACE]",
    "[/TRACE]",
    "[CODE]",
    "[/CODE]",
    "[THOUGHT]",
    "[/THOUGHT]",
    "[LOCALS]",
    "[/LOCALS]",
    "[RETURN]",
    "[/RETURN]",
)
# each ConTra tag by name (spelled once, in TAGS), and the vanilla format's answer group
TRACE_OPEN, TRACE_CLOSE, CODE_OPEN, CODE_CLOSE, THOUGHT_OPEN, THOUGHT_CLOSE = TAGS[:6]
LOCALS_OPEN, LOCALS_CLOSE, RETURN_OPEN, RETURN_CLOSE = TAGS[6:]
ANSWER_OPEN, ANSWER_CLOSE = "[ANSWER]", "[/ANSWER]"
THOUGHT_PLACEHOLDER = "<fill in: reasoning for this block>"


def last_group(text: str, open_tag: str, close_tag: str, max_chars: int | None = None) -> str | None:
    """The stripped body of the last ``open_tag`` group (up to ``close_tag``, or the end of an unclosed
    one), or None when there is none, it is empty, or it is longer than ``max_chars``.

    >>> last_group("[ANSWER] 1 [/ANSWER] [ANSWER]\\n2\\n", "[ANSWER]", "[/ANSWER]")
    '2'
    """
    k = text.rfind(open_tag)
    if k < 0:
        return None
    body = text[k + len(open_tag) :]
    end = body.find(close_tag)
    body = (body if end < 0 else body[:end]).strip()
    if not body or (max_chars is not None and len(body) > max_chars):
        return None
    return body


def lineno_line(i: int, src: str) -> str:
    return f"[LINENO {i}]    {src}"


def code_listing(lines: Sequence[str]) -> str:
    return "\n".join(lineno_line(i, s) for i, s in enumerate(lines))


def _clean_thought(text: str) -> str:
    """Drop lines that would read as tags: a thought can never break the structure."""
    kept = [ln for ln in text.strip("\n").split("\n") if ln.strip() not in TAGS and not ln.startswith("[LINENO")]
    return "\n".join(kept)


def assertion(flow: Flow, answer: str | None = None) -> str:
    return f"assert {flow.entry}({flow.input}) == {flow.output_text if answer is None else answer}"


def render_trace(flow: Flow, thoughts: Sequence[str] | None = None) -> str:
    """The ConTra trace of ``flow``; ``thoughts[i]`` fills block i (empty when omitted)."""
    if thoughts is not None and len(thoughts) != len(flow.blocks):
        raise ValueError(f"{len(thoughts)} thoughts for {len(flow.blocks)} blocks")
    out = [TRACE_OPEN]
    for i, b in enumerate(flow.blocks):
        out.append(CODE_OPEN)
        out.extend(lineno_line(n, flow.lines[n]) for n in range(b.start, b.end + 1))
        out += [CODE_CLOSE, THOUGHT_OPEN]
        thought = _clean_thought(thoughts[i]) if thoughts is not None else ""
        if thought:
            out.append(thought)
        out += [THOUGHT_CLOSE, LOCALS_OPEN, b.locals_text, LOCALS_CLOSE]
    out += [RETURN_OPEN, assertion(flow), RETURN_CLOSE, TRACE_CLOSE]
    return "\n".join(out)


def skeleton(flow: Flow) -> str:
    """The ground-truth trace with every ``[THOUGHT]`` left for the teacher to fill in."""
    return render_trace(flow, [THOUGHT_PLACEHOLDER] * len(flow.blocks))


PROMPT = """You are given a Python function and an input. Trace the execution block by block \
and predict the output.

Write a ConTra trace: the first line is [TRACE] and the last line is [/TRACE]. For each code \
block, in execution order, write [CODE] with the block's lines exactly as numbered below \
([LINENO X] followed by four spaces and the line), then [THOUGHT] with your reasoning, then \
[LOCALS] with a Python dict literal of the function's local variables after the block. Finish \
with [RETURN] holding one line `assert {entry}(...) == <output literal>`. Each tag stands \
alone on its line.

[CODE]
{listing}
[/CODE]

Input: {entry}({input})
"""


# ``bare``: the numbered code, the call and the call's frame, for a policy trained from scratch on ConTra
# rows (it has never read instructions; the fixed text would be ~40% of every training sequence). The frame
# line (the arguments bound to the parameters, as a LOCALS dict: :func:`entry_frame`) makes the first
# LOCALS' copy of the input a plain token-by-token copy (docs/training.md: without it the micro policy
# wrote the input into the first LOCALS in 42 of 100 held-out programs and copied RETURN's call from there).
BARE_PROMPT = """[CODE]
{listing}
[/CODE]

Input: {entry}({input})
{frame}"""
PROMPT_STYLES = {"instruct": PROMPT, "bare": BARE_PROMPT}


def entry_frame(flow: Flow) -> str | None:
    """The call's arguments bound to the entry function's parameters, written as a LOCALS dict (the
    function's locals on entry, before its first line), or None where the binding cannot be read from the
    code and the input alone (no literal input, ``*args``/``**kwargs``, more arguments than parameters,
    an unknown keyword, no ``def`` of that name). Parameters left to their defaults are not listed.

    >>> from codethinker.contra.tracer import Flow
    >>> flow = Flow.from_json('{"entry": "f", "input": "[1,2], k=3", "output": "3",'
    ...     ' "code": "def f(xs, k=0, s=1):\\\\n    return k\\\\n",'
    ...     ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{}"}]}')
    >>> entry_frame(flow)
    "{'xs': [1, 2], 'k': 3}"
    """
    try:
        args, kwargs = parse_call_args(flow.input)
        tree = ast.parse("\n".join(flow.lines))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == flow.entry), None)
    if fn is None or fn.args.vararg or fn.args.kwarg:
        return None
    positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    keywords = set(positional[len(fn.args.posonlyargs) :]) | {a.arg for a in fn.args.kwonlyargs}
    bound = dict(zip(positional, args, strict=False))  # too many arguments: refused below
    if len(args) > len(positional) or any(k not in keywords or k in bound for k in kwargs):
        return None
    bound.update(kwargs)
    order = [*positional, *(a.arg for a in fn.args.kwonlyargs)]  # as ``locals()`` lists them on entry
    try:
        return "{" + ", ".join(f"{k!r}: {literal_repr(bound[k])}" for k in order if k in bound) + "}"
    except NoLiteral:
        return None


def render_prompt(flow: Flow, style: str = "instruct") -> list[dict[str, str]]:
    """ConTra chat prompt for a flow (the model sees code and input only).

    ``style``: ``instruct`` (zero-shot: the format explained) or ``bare`` (the code and the call).
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt style must be one of {', '.join(PROMPT_STYLES)}, got {style!r}")
    frame = entry_frame(flow) if style == "bare" else None
    text = PROMPT_STYLES[style].format(
        entry=flow.entry, listing=code_listing(flow.lines), input=flow.input, frame=f"{frame}\n" if frame else ""
    )
    return [{"role": "user", "content": text}]


VANILLA = """You are given a Python function and an assertion containing an input to the \
function. Complete the assertion with a literal (no unsimplified expressions, no function \
calls) containing the output when executing the provided code on the given input. Think \
step by step inside [THOUGHT] and [/THOUGHT], then give the full assertion inside [ANSWER] \
and [/ANSWER].

```python
{code}
assert {entry}({input}) == ??
```
"""


def vanilla_prompt(code: str, entry: str, input_text: str) -> list[dict[str, str]]:
    """CRUXEval-style ``assert f(x) == ??`` prompt (base models, the CodeReasoner baseline)."""
    return [{"role": "user", "content": VANILLA.format(code=code.rstrip(), entry=entry, input=input_text)}]
