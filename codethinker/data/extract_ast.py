"""The AST and source-text helpers of the static filter (:mod:`codethinker.data.extract`), none of
which decides a drop: the names a preamble defines and a function reads from module level, the names
bound inside a method, docstring statements, the AST the rewritten text must have."""

from __future__ import annotations

import ast
import copy
import importlib
import symtable
import sys

__all__ = ["preamble_names"]


def _star_names(module: str) -> list[str]:
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    return list(names) if names is not None else [n for n in dir(mod) if not n.startswith("_")]


def preamble_names(preamble: str) -> dict[str, tuple[str, str, str]]:
    """What each module-level name of a preamble is: ``name -> (kind, module_or_text, original)``.

    kind is ``from`` (``from module import original as name``), ``import``, ``assign``
    (the statement's text) or ``class``/``def`` (helpers that are not extracted).
    """
    out: dict[str, tuple[str, str, str]] = {}
    try:
        tree = ast.parse(preamble)
    except SyntaxError:
        return out
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name == "*":
                    if node.module.split(".")[0] in sys.stdlib_module_names:
                        out.update({n: ("from", node.module, n) for n in _star_names(node.module)})
                else:
                    out[alias.asname or alias.name] = ("from", node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = ("import", alias.name, alias.asname or "")
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ("assign", ast.unparse(node), node.targets[0].id)
        elif isinstance(node, ast.ClassDef):
            out[node.name] = ("class", node.name, node.name)
        elif isinstance(node, ast.FunctionDef) and out.get(node.name, ("",))[0] != "from":
            # A helper def that re-implements a name a star import already gave (``pairwise``
            # over itertools.pairwise) keeps the import; other helper defs are not extracted.
            out[node.name] = ("def", node.name, node.name)
    return out


_PREAMBLE_CACHE: dict[str, dict[str, tuple[str, str, str]]] = {}


_PREAMBLE_CACHE: dict[str, dict[str, tuple[str, str, str]]] = {}


def cached_preamble_names(preamble: str) -> dict[str, tuple[str, str, str]]:
    """:func:`preamble_names`, computed once per preamble text (problems share a few preambles)."""
    if preamble not in _PREAMBLE_CACHE:
        _PREAMBLE_CACHE[preamble] = preamble_names(preamble)
    return _PREAMBLE_CACHE[preamble]


def _bound_names(fn: ast.AST) -> set[str]:
    """Every name bound anywhere inside ``fn`` (parameters included)."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _docstring_stmts(body: list[ast.stmt]) -> list[ast.Expr]:
    """The docstring and the string statements right after it (all no-ops), as normalize_source drops them."""
    k = 0
    while (
        k + 1 < len(body)
        and isinstance(body[k], ast.Expr)
        and isinstance(body[k].value, ast.Constant)
        and isinstance(body[k].value.value, str)
    ):
        k += 1
    return body[:k]  # type: ignore[return-value]


class _Expected(ast.NodeTransformer):
    """The AST the rewritten text must have: docstrings gone, ``self.<entry>`` -> ``f``."""

    def __init__(self, self_name: str | None, entry: str, name: str):
        self.self_name, self.entry, self.name = self_name, entry, name

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.body = node.body[len(_docstring_stmts(node.body)) :]
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        v = node.value
        if isinstance(v, ast.Name) and v.id == self.self_name and node.attr == self.entry:
            return ast.Name(id=self.name, ctx=ast.Load())
        self.generic_visit(node)
        return node


def _strip_annotations(args: ast.arguments) -> ast.arguments:
    args = copy.deepcopy(args)
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
            a.type_comment = None
    return args


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _byte_to_char(line: str, col: int) -> int:
    return len(line.encode("utf-8")[:col].decode("utf-8", errors="replace"))


def _module_globals(text: str, name: str) -> set[str]:
    """Names the function ``name`` (and its nested scopes) reads from module level."""
    table = symtable.symtable(text, "<f>", "exec")
    out: set[str] = set()
    stack = [c for c in table.get_children() if c.get_name() == name]
    while stack:
        t = stack.pop()
        out.update(s.get_name() for s in t.get_symbols() if s.is_global() and s.is_referenced())
        stack.extend(t.get_children())
    return out - {name}
