"""CRUXEval-I: predict an input of ``f`` that gives the stated output (800 programs).

The prompt is CRUXEval's input-prediction assertion, ``assert f(??) == <output>``, with the same
[THOUGHT]/[ANSWER] instruction as the output-prediction baseline prompt
(:data:`codethinker.contra.render.VANILLA`). The answer is the call in the last ``[ANSWER]`` group
(``assert f(<input>) == ...``; a bare ``f(<input>)`` or the argument text alone is read too).

Judging is CRUXEval's rule, ``<output> == f(<input>)``, with the two sides kept apart: ``f`` runs on the
predicted input in the project's sandbox (:mod:`codethinker.sandbox`; 3 s per program as in CRUXEval's
harness) and sends back its value as plain builtin data (:func:`~codethinker.contra.values.run_call`: an
object, a subclass of a builtin or nan has none, ``error``), and ``==`` is evaluated here against the stated
output, which never enters the sandbox; so an object whose ``__eq__`` always holds, or a subclass of the
output's type, passes nothing. The predicted call must parse as one call of ``f`` (``ast``): text that would
break out of the call (``1); import os; (``) is ``no_answer``, never executed. ``f`` only ever runs on data:
arguments that are literals (788 of CRUXEval's 800 inputs) are read here
(:func:`~codethinker.contra.values.parse_call_args`); any other argument expression (``dict(a=1)``,
``'ab'.upper()``) is first evaluated in a sandbox process of its own (the program's module beside it, for its
names), which sends back the arguments' ``repr``; that text is read here as literals, and ``f`` then runs on
them in a fresh process. So the model's code never shares a process with the ``f`` that is judged: an
expression that rebinds ``f.__code__`` or patches what reports the value changes only its own process.
Arguments without a literal form (a function, a ``range``, a ``deque``) are ``not_data``: they cannot reach
``f`` without the model's code beside it, so 3 of CRUXEval's 800 reference inputs (two lambdas and a
``range``) are not judged, where CRUXEval's harness runs them with ``f``. Plain data compares as CRUXEval's
``==`` does (``1 == 1.0``), except that a returned ``deque`` or ``Counter`` arrives as a list or dict.

>>> predicted_args("[THOUGHT]...[/THOUGHT]\\n[ANSWER]\\nassert f('ab', 2) == 'abab'\\n[/ANSWER]", "f")
"'ab', 2"
>>> predicted_args("[ANSWER]\\nf(1); import os\\n[/ANSWER]", "f") is None
True
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codethinker.contra.calls import entry_call
from codethinker.contra.render import ANSWER_CLOSE, ANSWER_OPEN, last_group
from codethinker.evaluation.task import Item, Verdict, register

__all__ = ["PROMPT", "CRUXEvalInput", "literal_call", "predicted_args"]

TIMEOUT_S = 3.0  # CRUXEval's harness: 3 s per check program
MAX_ANSWER_CHARS = 20_000
ARGS = "__cruxeval_args"  # the function the judge appends to evaluate an argument expression apart from f
# its body: the repr of each argument, as the call would receive it
ARGS_REPR = "(lambda *a, **k: ', '.join([*map(repr, a), *(f'{n}={v!r}' for n, v in k.items())]))"
PROMPT = """You are given a Python function and an output. Find any input such that executing the \
function on the input leads to the given output. There may be multiple answers; give only one. \
Think step by step inside [THOUGHT] and [/THOUGHT], then give the full assertion with the input \
inside [ANSWER] and [/ANSWER].

```python
{code}
assert f(??) == {output}
```
"""


def predicted_args(text: str, entry: str = "f") -> str | None:
    """The argument text of the predicted call in the last ``[ANSWER]`` group, or None when there is
    no answer or it is not exactly one call of ``entry`` (an assertion's left side, or the call alone)."""
    body = last_group(text, ANSWER_OPEN, ANSWER_CLOSE, MAX_ANSWER_CHARS)
    if body is None:
        return None
    for candidate in (body, f"{entry}({body})"):
        try:
            tree = ast.parse(candidate)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        if len(tree.body) != 1:
            continue
        node = tree.body[0]
        expr = entry_call(node.test if isinstance(node, ast.Assert) else getattr(node, "value", None), entry)
        if expr is not None:
            parts = [ast.get_source_segment(candidate, a) or "" for a in expr.args]
            for kw in expr.keywords:
                value = ast.get_source_segment(candidate, kw.value) or ""
                parts.append(f"**{value}" if kw.arg is None else f"{kw.arg}={value}")
            return ", ".join(parts)
    return None


def literal_call(args: str | None) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The predicted call's arguments as literal ``(args, kwargs)``, or None when one is not a literal.

    >>> literal_call("'ab', n=2"), literal_call("'ab' * 2"), literal_call(None)
    ((('ab',), {'n': 2}), None, None)
    """
    from codethinker.contra.values import parse_call_args

    if args is None:
        return None
    try:
        return parse_call_args(args, MAX_ANSWER_CHARS)
    except ValueError:
        return None


@register("cruxeval-i")
class CRUXEvalInput:
    """CRUXEval-I over the 800 CRUXEval programs (``<id>/0``; the stored input is the reference)."""

    name, display, group = "cruxeval-i", "CRUXEval-I", "input"
    stop = (ANSWER_CLOSE,)

    def __init__(self, timeout_s: float = TIMEOUT_S, workers: int | None = None) -> None:
        self.timeout_s, self.workers = timeout_s, workers

    def load(self, mirror: Path | None, cache_dir: Path) -> list[Item]:
        from codethinker.data.sources import SOURCES, resolve
        from codethinker.evaluation.benchmarks import load_cruxeval

        path, _ = resolve(SOURCES["cruxeval"], mirror, cache_dir)
        return [
            Item(
                p.id,
                [{"role": "user", "content": PROMPT.format(code=p.code.rstrip(), output=p.expected)}],
                {"code": p.code, "output": p.expected, "input": p.input},
            )
            for p in load_cruxeval(path)
        ]

    def unavailable(self) -> str | None:
        return None  # Python only: the sandbox runs it

    def reference_text(self, item: Item) -> str:
        ref = item.reference
        return f"{ANSWER_OPEN}\nassert f({ref['input']}) == {ref['output']}\n{ANSWER_CLOSE}"

    def judge(self, items: Sequence[Item], texts: Sequence[str]) -> list[Verdict]:
        from codethinker.contra.values import parse_literal  # importing it registers the sandbox's "call" runner
        from codethinker.sandbox import Job, Sandbox, SandboxConfig

        args = [predicted_args(t) for t in texts]
        calls = [literal_call(a) for a in args]
        status: dict[int, tuple[str, str]] = {}  # answers decided before f runs: (status, detail)
        with Sandbox(SandboxConfig(timeout_s=self.timeout_s, workers=self.workers)) as sb:
            exprs = {  # argument expressions: evaluated in a process of their own, sent back as repr text
                i: Job(
                    f"{item.reference['code'].rstrip()}\n\n\ndef {ARGS}():\n    return {ARGS_REPR}({a})\n", entry=ARGS
                )
                for i, (item, a, call) in enumerate(zip(items, args, calls, strict=True))
                if a is not None and call is None
            }
            for i, r in zip(exprs, sb.map(list(exprs.values())) if exprs else [], strict=True):
                call = literal_call(r.value) if r.status == "ok" and isinstance(r.value, str) else None
                if r.status != "ok":
                    status[i] = (r.status, f"the argument expression: {r.error_type}: {r.error_message}")
                elif call is None:
                    status[i] = ("not_data", f"an argument has no literal form: f({str(r.value)[:200]})")
                calls[i] = call
            jobs = {  # f on data only, in a fresh process
                i: Job(item.reference["code"], args=call[0], kwargs=call[1], entry="f", entry_def=True)
                for i, (item, call) in enumerate(zip(items, calls, strict=True))
                if call is not None
            }
            results = dict(zip(jobs, sb.map(list(jobs.values())), strict=True)) if jobs else {}
        out = []
        for i, item in enumerate(items):
            r = results.get(i)
            if i in status:
                out.append(Verdict(False, *status[i]))
            elif r is None:
                out.append(Verdict(False, "no_answer", "no single call of f in [ANSWER]"))
            elif r.status != "ok":
                out.append(Verdict(False, r.status, f"{r.error_type}: {r.error_message}"))
            else:
                right = r.value == parse_literal(item.reference["output"])  # plain data on both sides
                how = " (an argument expression, evaluated apart from f)" if i in exprs else ""
                out.append(Verdict(right, "pass" if right else "fail", f"f({args[i]})"[:300] + how))
        return out
