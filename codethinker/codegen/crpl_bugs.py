"""CRPL's code bugs (docs/recode.md): the solution with one token of a method changed, for ``t-``.

>>> [name for name, _ in bug_candidates("def f(x):\\n    return x + 1\\n")]
['+->-@2:13', '1->2@2:15']
"""

from __future__ import annotations

import ast
import io
import tokenize

__all__ = ["bug_candidates"]

_SWAP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+"}
_SWAP_NAMES = {"and": "or", "or": "and", "min": "max", "max": "min", "True": "False", "False": "True"}


def bug_candidates(code: str) -> list[tuple[str, str]]:
    """``(edit, code)``: the code with one token of a method body changed (a comparison, + or -, and/or,
    min/max, True/False, or an integer +1); comments and layout kept. Only versions that parse."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    lines, out = code.splitlines(keepends=True), []
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    in_def = False
    for tok in toks:
        in_def = in_def or (tok.type == tokenize.NAME and tok.string == "def")
        new = _swap(tok) if in_def else None
        if new is None:
            continue
        start = offsets[tok.start[0] - 1] + tok.start[1]
        mutated = code[:start] + new + code[start + len(tok.string) :]
        if _parses(mutated):
            out.append((f"{tok.string}->{new}@{tok.start[0]}:{tok.start[1]}", mutated))
    return out


def _swap(tok: tokenize.TokenInfo) -> str | None:
    if tok.type == tokenize.OP:
        return _SWAP.get(tok.string)
    if tok.type == tokenize.NAME:
        return _SWAP_NAMES.get(tok.string)
    if tok.type == tokenize.NUMBER and tok.string.isdigit():
        return str(int(tok.string) + 1)
    return None


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True
