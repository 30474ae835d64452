"""Block split and cyclomatic-complexity weights (SPEC §3).

Each outermost statement of the function body is one block (a loop, an ``if``, a ``try``:
one block with all its lines). Everything before the body's first statement (the ``def``
line, decorators, module-level lines above) joins the first block. Statements that share a
line (``a = 1; b = 2``) share a block. Line numbers are 0-based over the normalized program.

CCW of a block = 1 + McCabe decision points of the function-body statements in it:
``if``/``elif``, ``for``, ``while``, ``except``, each extra operand of a boolean operator,
comprehension loops and conditions, conditional expressions, ``case``.

>>> from codethinker.contra.normalize import normalize_source
>>> src = "def f(n):\\n    x = 0\\n    while n:\\n        n -= 1\\n    return x"
>>> [(b.start, b.end, b.weight) for b in split_blocks(normalize_source(src))]
[(0, 1, 1), (2, 3, 2), (4, 4, 1)]
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from codethinker.contra.normalize import Normalized, find_entry

__all__ = ["BlockSpec", "ccw", "split_blocks"]

_DECISIONS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.match_case)


@dataclass(frozen=True)
class BlockSpec:
    start: int  # first LINENO (inclusive)
    end: int  # last LINENO (inclusive)
    weight: int  # CCW


def ccw(nodes: list[ast.stmt]) -> int:
    """1 + the decision points in ``nodes`` (nested functions and lambdas included)."""
    points = 0
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, _DECISIONS):
                points += 1
            elif isinstance(node, ast.BoolOp):
                points += len(node.values) - 1
            elif isinstance(node, ast.comprehension):
                points += 1 + len(node.ifs)
    return 1 + points


def split_blocks(prog: Normalized) -> list[BlockSpec]:
    """The blocks of the entry function of a normalized program, in source order."""
    fn = find_entry(ast.parse(prog.text), prog.entry)
    groups: list[list[ast.stmt]] = []
    spans: list[list[int]] = []
    for stmt in fn.body:
        start, end = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
            groups[-1].append(stmt)
        else:
            spans.append([start, end])
            groups.append([stmt])
    spans[0][0] = 0
    for i in range(1, len(spans)):  # normalized text has no gaps; keep blocks contiguous regardless
        spans[i][0] = spans[i - 1][1] + 1
    return [BlockSpec(s, e, ccw(g)) for (s, e), g in zip(spans, groups, strict=True)]
