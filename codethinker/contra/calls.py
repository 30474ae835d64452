"""The call of a program's entry function that an answer line or expression is.

An input generator's line (``f(1, 2) == 3``) and a CRUXEval-I answer (``assert f(1, 2) == 3``) both name
the call on the left of at most one ``==``; :func:`entry_call` finds it in the parsed expression, so a string
argument holding `` == `` stays whole.

>>> import ast
>>> entry_call(ast.parse("f(0, ' == ') == [1]", mode="eval").body, "f").args[1].value
' == '
>>> entry_call(ast.parse("g(1) == 2", mode="eval").body, "f") is None
True
"""

from __future__ import annotations

import ast


def entry_call(expr: ast.AST | None, entry: str) -> ast.Call | None:
    """``expr`` as a call of ``entry`` (the left side of ``call == value`` included), else None.

    >>> entry_call(ast.parse("f(1) == 2 == 2", mode="eval").body, "f") is None  # a chained comparison
    True
    >>> entry_call(ast.parse("f.g(1)", mode="eval").body, "f") is None  # an attribute, not the function
    True
    """
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.Eq):
        expr = expr.left
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == entry:
        return expr
    return None
