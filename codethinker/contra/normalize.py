"""Source normalization and LINENO numbering (SPEC §3, "the project's block rule").

The program shown to the model drops comment-only lines, blank lines and the docstring of
the function under test, without changing the program: lines inside a multi-line string
literal stay, and the result must compile to the same AST as the input (checked).
Module-level statements *after* the function under test (helpers defined below it) are moved
above it, so that the function's blocks end the listing (a project decision, docs/decisions.md).

>>> normalize_source('# c\\ndef f(x):\\n    \"\"\"doc\"\"\"\\n\\n    return x  # keep\\n').lines
('def f(x):', '    return x  # keep')
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

from codethinker.errors import CodethinkerError

__all__ = ["NormalizeError", "Normalized", "find_entry", "normalize_source"]

_STRING_TOKENS = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


class NormalizeError(CodethinkerError, ValueError):
    """The program cannot be normalized (syntax error, no entry function, ...)."""


@dataclass(frozen=True)
class Normalized:
    text: str  # normalized source (LINENO i is lines[i])
    lines: tuple[str, ...]
    entry: str


def find_entry(tree: ast.Module, entry: str) -> ast.FunctionDef:
    """The last module-level ``def entry`` (the one a call would reach)."""
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry]
    if not found:
        raise NormalizeError(f"the program does not define a function '{entry}'")
    return found[-1]


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise NormalizeError(f"syntax error: {exc}") from None


def _string_lines(source: str) -> tuple[set[int], set[int]]:
    """1-based lines touched by a multi-line string token: (interior lines, all its lines)."""
    interior: set[int] = set()
    touched: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in _STRING_TOKENS and tok.end[0] > tok.start[0]:
                interior.update(range(tok.start[0] + 1, tok.end[0] + 1))
                touched.update(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, IndentationError) as exc:
        raise NormalizeError(f"cannot tokenize: {exc}") from None
    return interior, touched


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=False)


def normalize_source(source: str, entry: str = "f") -> Normalized:
    """Normalize ``source`` for ConTra numbering; raises :class:`NormalizeError`."""
    tree = _parse(source)
    fn = find_entry(tree, entry)
    raw = source.split("\n")
    drop: set[int] = set()  # 1-based
    body = fn.body
    k = 0  # the docstring and any string statements right after it (no-ops): all dropped, so that
    while (  # normalizing twice gives the same text
        k + 1 < len(body)
        and isinstance(body[k], ast.Expr)
        and isinstance(body[k].value, ast.Constant)
        and isinstance(body[k].value.value, str)
        and body[k].lineno > (fn.lineno if k == 0 else body[k - 1].end_lineno or 0)
        and body[k].end_lineno is not None
        and body[k].end_lineno < body[k + 1].lineno
    ):
        drop.update(range(body[k].lineno, body[k].end_lineno + 1))
        k += 1
    protected, in_string = _string_lines(source)
    for i, line in enumerate(raw, start=1):
        s = line.strip()
        if i not in protected and (not s or s.startswith("#")):
            drop.add(i)
    # Module-level statements after the entry function move above it.
    idx = tree.body.index(fn)
    after = tree.body[idx + 1 :]
    fn_start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    assert fn.end_lineno is not None
    order: list[int] = []
    if after:
        if any(isinstance(n, ast.If | ast.For | ast.While | ast.Expr | ast.Try | ast.With) for n in after):
            raise NormalizeError(f"module-level code runs after '{entry}' is defined")
        if any(isinstance(x, ast.Name) and x.id == entry for n in after for x in ast.walk(n)):
            raise NormalizeError(f"module-level code after '{entry}' refers to it")
        first_after = min(min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]) for n in after)
        order = list(range(1, fn_start)) + list(range(first_after, len(raw) + 1))
        order += list(range(fn_start, first_after))
    else:
        order = list(range(1, len(raw) + 1))
    lines = tuple(raw[i - 1] if i in in_string else raw[i - 1].rstrip() for i in order if i not in drop)
    text = "\n".join(lines) + "\n"
    new_tree = _parse(text)
    expected = ast.Module(body=[*tree.body[:idx], *after, _without_docstring(fn, drop)], type_ignores=[])
    if _dump(new_tree) != _dump(expected):
        raise NormalizeError("normalization would change the program")
    return Normalized(text=text, lines=lines, entry=entry)


def _without_docstring(fn: ast.FunctionDef, drop: set[int]) -> ast.FunctionDef:
    k = 0
    while k < len(fn.body) and fn.body[k].lineno in drop and isinstance(fn.body[k], ast.Expr):
        k += 1
    if k:
        clone = ast.FunctionDef(**{f: getattr(fn, f) for f in fn._fields})
        clone.body = fn.body[k:]
        return clone
    return fn
