"""CRUXEval-I: predict an input of ``f`` that gives the stated output (800 programs).

The prompt is CRUXEval's input-prediction assertion, ``assert f(??) == <output>``, with the same
[THOUGHT]/[ANSWER] instruction as the output-prediction baseline prompt
(:data:`codethinker.contra.render.VANILLA`). The answer is the call in the last ``[ANSWER]`` group
(``assert f(<input>) == ...``; a bare ``f(<input>)`` or the argument text alone is read too).

Judging is CRUXEval's own rule: the prediction is correct when ``<output> == f(<input>)`` runs
true, here in the project's sandbox (:mod:`codethinker.sandbox`; 3 s per program as in CRUXEval's
harness). Before anything runs, the predicted call must parse as one call of ``f`` (``ast``): text
that would break out of the call (``1); import os; (``) is ``no_answer``, never executed. Any other
expression as an argument runs, as in CRUXEval, inside the sandbox.

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

from codethinker.contra.render import ANSWER_CLOSE, ANSWER_OPEN, last_group
from codethinker.evaluation.generalize import Item, Verdict, register

__all__ = ["PROMPT", "CRUXEvalInput", "predicted_args"]

TIMEOUT_S = 3.0  # CRUXEval's harness: 3 s per check program
MAX_ANSWER_CHARS = 20_000
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
        expr = node.test if isinstance(node, ast.Assert) else getattr(node, "value", None)
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.Eq):
            expr = expr.left
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == entry:
            parts = [ast.get_source_segment(candidate, a) or "" for a in expr.args]
            for kw in expr.keywords:
                value = ast.get_source_segment(candidate, kw.value) or ""
                parts.append(f"**{value}" if kw.arg is None else f"{kw.arg}={value}")
            return ", ".join(parts)
    return None


def check_source(code: str, args: str, output: str) -> str:
    """The program the sandbox runs: the function, then ``__check()`` returns ``output == f(args)``."""
    return f"{code.rstrip()}\n\n\ndef __check():\n    return ({output}) == f({args})\n"


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
        from codethinker.sandbox import Job, Sandbox, SandboxConfig

        args = [predicted_args(t) for t in texts]
        jobs = {
            i: Job(check_source(it.reference["code"], a, it.reference["output"]), entry="__check")
            for i, (it, a) in enumerate(zip(items, args, strict=True))
            if a is not None
        }
        results: dict[int, Any] = {}
        if jobs:
            with Sandbox(SandboxConfig(timeout_s=self.timeout_s, workers=self.workers)) as sb:
                results = dict(zip(jobs, sb.map(list(jobs.values())), strict=True))
        out = []
        for i in range(len(items)):
            r = results.get(i)
            if r is None:
                out.append(Verdict(False, "no_answer", "no single call of f in [ANSWER]"))
            elif r.status != "ok":
                out.append(Verdict(False, r.status, f"{r.error_type}: {r.error_message}"))
            else:
                out.append(Verdict(r.value is True, "pass" if r.value is True else "fail", f"f({args[i]})"[:300]))
        return out
