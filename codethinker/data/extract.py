"""Static filter (funnel step 1): a LeetCode ``class Solution`` method -> a plain function ``f``.

A method that does not need ``self`` becomes a module-level ``def f(...)``; everything else is
dropped with a reason (:class:`Drop`). The rewrite keeps the original text of the body (its
formatting, names and line structure) and changes only:

- the ``def`` line: renamed to ``f``, ``self`` removed, type hints removed (they are kept in
  the record for input generation, so the program needs no ``typing`` import);
- comments, blank lines and docstrings (of ``f`` and of nested functions) are removed;
- the body is dedented one level;
- recursive calls ``self.<method>`` become ``f``, **only** where that is safe: the name ``f``
  must name nothing else anywhere in the method (no parameter, local, nested function,
  comprehension variable, import, global); otherwise the method is dropped (``rename_clash``);
- the module-level names the function uses from LeetCodeDataset's import preamble
  (``from collections import *`` ...) become explicit import lines above ``def f``
  (``from collections import Counter``); a builtin shadowed by the preamble (``pow`` by
  ``from math import *``) stays the builtin.

The result is checked: it must parse to exactly the AST expected from the transformation
above (``rewrite_mismatch`` otherwise), so no rewrite can change what the program does.

>>> src = "class Solution:\\n    def add(self, a: int, b: int) -> int:\\n        # sum\\n        return a + b\\n"
>>> print(extract_function(src, "Solution().add", "", min_lines=1).code, end="")
def f(a, b):
    return a + b
"""

from __future__ import annotations

import ast
import builtins
import copy
import importlib
import io
import re
import sys
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from codethinker.contra.normalize import NormalizeError, normalize_source
from codethinker.contra.values import NoLiteral, literal_repr, parse_call_args
from codethinker.data.extract_ast import (
    _bound_names,
    _docstring_stmts,
    _dump,
    _Expected,
    _module_globals,
    _strip_annotations,
    cached_preamble_names,
    preamble_names,
)

__all__ = [
    "DROP_REASONS",
    "Drop",
    "Extracted",
    "extract_function",
    "filter_problems",
    "positional_args",
    "preamble_names",
]

DROP_REASONS = {
    "syntax_error": "the solution does not parse",
    "bad_entry_point": "entry_point is not Solution().<method>",
    "entry_not_found": "class Solution has no such method",
    "decorated_method": "the method has a decorator other than @staticmethod",
    "uses_self": "the method reads or writes self (state, class attributes)",
    "needs_other_methods": "the method calls other methods of Solution",
    "needs_helper_class": "the method needs ListNode/TreeNode or another helper class",
    "needs_module_code": "the method needs module-level code of the solution",
    "third_party_module": "the method imports a module outside the standard library",
    "undefined_name": "the method uses a name nothing defines",
    "rename_clash": "self-recursion cannot be renamed to f safely (f names something else)",
    "rewrite_mismatch": "the rewritten text would not be the same program",
    "too_short": "fewer than min_lines lines after stripping",
    "no_usable_example": "no example input parses into literal arguments of f",
}


class Drop(Exception):
    def __init__(self, reason: str, detail: str = ""):
        assert reason in DROP_REASONS, reason
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass
class Extracted:
    code: str  # import lines + def f(...)
    params: list[str]
    annotations: dict[str, str] = field(default_factory=dict)  # parameter -> type hint source
    returns: str | None = None
    n_lines: int = 0  # lines of def f after normalization
    recursive: bool = False


_ENTRY = re.compile(r"^Solution\(\)\.([A-Za-z_]\w*)$")
_BUILTINS = set(dir(builtins))


def _byte_to_char(line: str, col: int) -> int:
    return len(line.encode("utf-8")[:col].decode("utf-8", errors="replace"))


def _source_lines(src: str, method: ast.FunctionDef, sites: list[ast.Attribute], name: str) -> list[str]:
    """The method's body lines: comments, blank lines and docstrings removed, sites renamed, dedented."""
    lines = src.split("\n")
    interior: set[int] = set()  # 1-based lines inside a multi-line string (after its first line)
    comments: dict[int, int] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            interior.update(range(tok.start[0] + 1, tok.end[0] + 1))
        elif tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.start[1]
    drop: set[int] = set()
    for node in ast.walk(method):
        for doc in _docstring_stmts(node.body) if isinstance(node, ast.FunctionDef) else []:
            assert doc.end_lineno is not None
            drop.update(range(doc.lineno, doc.end_lineno + 1))
    by_line: dict[int, list[ast.Attribute]] = {}
    for s in sites:
        if s.end_lineno != s.lineno:
            raise Drop("rewrite_mismatch", "a self.<method> reference spans lines")
        by_line.setdefault(s.lineno, []).append(s)
    indent = method.col_offset
    out: list[str] = []
    assert method.end_lineno is not None
    for i in range(method.body[0].lineno, method.end_lineno + 1):
        line = lines[i - 1]
        if i in drop:
            continue
        raw = line
        if i in comments:
            line = line[: comments[i]].rstrip()
        for s in sorted(by_line.get(i, []), key=lambda n: -n.col_offset):
            a, b = _byte_to_char(raw, s.col_offset), _byte_to_char(raw, s.end_col_offset or 0)
            line = line[:a] + name + line[b:]
        if i in interior:  # inside a multi-line string: kept as it is (not dedented)
            out.append(line)
            continue
        line = line.rstrip()
        if not line.strip():
            continue
        lead = len(line) - len(line.lstrip(" "))
        out.append(line[min(lead, indent) :])
    return out


def _parse_method(completion: str, entry_point: str) -> tuple[ast.Module, ast.ClassDef, ast.FunctionDef, str]:
    """The parsed solution, its (last) ``class Solution``, the method ``entry_point`` names and that
    method's name; :class:`Drop` ``bad_entry_point``, ``syntax_error``, ``entry_not_found``."""
    m = _ENTRY.match(entry_point.strip())
    if not m:
        raise Drop("bad_entry_point", entry_point)
    entry = m.group(1)
    try:
        tree = ast.parse(completion)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Drop("syntax_error", f"{type(exc).__name__}: {exc}") from None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Solution"]
    methods = [n for c in classes[-1:] for n in c.body if getattr(n, "name", None) == entry]
    if not methods or not isinstance(methods[-1], ast.FunctionDef):
        raise Drop("entry_not_found", entry)
    return tree, classes[-1], methods[-1], entry


def _self_name(method: ast.FunctionDef) -> str | None:
    """The method's ``self`` parameter (None for a ``@staticmethod``); :class:`Drop` for any other
    decorator or a method without parameters."""
    static = False
    for d in method.decorator_list:
        if isinstance(d, ast.Name) and d.id == "staticmethod":
            static = True
        else:
            raise Drop("decorated_method", ast.unparse(d))
    all_args = [*method.args.posonlyargs, *method.args.args]
    self_name = None if static else (all_args[0].arg if all_args else None)
    if not static and self_name is None:
        raise Drop("uses_self", "the method has no self parameter")
    return self_name


def _recursion_sites(
    method: ast.FunctionDef, cls: ast.ClassDef, self_name: str | None, entry: str, name: str
) -> list[ast.Attribute]:
    """The ``self.<entry>`` references (recursion) to rename to ``name``: the only use of ``self``
    allowed; :class:`Drop` ``uses_self``, ``needs_other_methods``, ``rename_clash``."""
    parents = {child: node for node in ast.walk(method) for child in ast.iter_child_nodes(node)}
    sites: list[ast.Attribute] = []
    other_methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    if self_name is not None:
        if self_name in _bound_names(ast.Module(body=method.body, type_ignores=[])):
            raise Drop("uses_self", f"'{self_name}' is rebound inside the method")
        for node in ast.walk(method):
            if not (isinstance(node, ast.Name) and node.id == self_name):
                continue
            par = parents.get(node)
            if isinstance(par, ast.Attribute) and isinstance(par.ctx, ast.Load) and par.attr == entry:
                sites.append(par)
            elif isinstance(par, ast.Attribute) and par.attr in other_methods:
                raise Drop("needs_other_methods", f"{self_name}.{par.attr}")
            else:
                raise Drop("uses_self", ast.unparse(par) if isinstance(par, ast.Attribute) else self_name)
    if sites and name in _bound_names(method) | {
        n.id for n in ast.walk(method) if isinstance(n, ast.Name) and n.id == name
    }:
        raise Drop("rename_clash", f"'{name}' already names something inside the method")
    return sites


def _signature(
    method: ast.FunctionDef, self_name: str | None
) -> tuple[list[ast.arg], dict[str, str], str | None, ast.arguments]:
    """The positional parameters without ``self``, their type hints and the return hint (kept for
    input generation), and the arguments without ``self`` and without hints (for ``def f``)."""
    params_args = copy.deepcopy(method.args)
    if self_name is not None:
        if params_args.posonlyargs:
            params_args.posonlyargs = params_args.posonlyargs[1:]
        else:
            params_args.args = params_args.args[1:]
    pos = [*params_args.posonlyargs, *params_args.args]
    annotations = {a.arg: ast.unparse(a.annotation) for a in pos if a.annotation is not None}
    returns = ast.unparse(method.returns) if method.returns is not None else None
    return pos, annotations, returns, _strip_annotations(params_args)


def _check_rewrite(
    completion: str, fn_text: str, entry: str, self_name: str | None, name: str, stripped: ast.arguments
) -> None:
    """:class:`Drop` ``rewrite_mismatch`` unless ``fn_text`` parses to exactly the method's AST with
    docstrings gone, ``self.<entry>`` as ``name``, ``stripped`` arguments and no return hint."""
    try:
        new_tree = ast.parse(fn_text)
    except (SyntaxError, ValueError) as exc:
        raise Drop("rewrite_mismatch", f"rewritten text does not parse: {exc}") from None
    fresh = ast.parse(completion)  # a second copy to transform (faster than deepcopy)
    fresh_cls = [n for n in fresh.body if isinstance(n, ast.ClassDef) and n.name == "Solution"][-1]
    fresh_method = [n for n in fresh_cls.body if getattr(n, "name", None) == entry][-1]
    expected = _Expected(self_name, entry, name).visit(fresh_method)
    expected.name, expected.args, expected.returns, expected.decorator_list = name, stripped, None, []
    if _dump(new_tree.body[0]) != _dump(expected):
        raise Drop("rewrite_mismatch", "the rewritten function differs from the original")


def _check_hints(annotations: dict[str, str], returns: str | None) -> None:
    """Hints that name anything but typing / builtins mean helper classes (ListNode, TreeNode, ...)."""
    for hint in [*annotations.values(), returns or ""]:
        for n in re.findall(r"[A-Za-z_]\w*", hint):
            if n not in _BUILTINS and not hasattr(importlib.import_module("typing"), n):
                raise Drop("needs_helper_class", f"type hint names {n}")


def extract_function(
    completion: str, entry_point: str, preamble: str, *, min_lines: int = 5, name: str = "f"
) -> Extracted:
    """Rewrite the Solution method named by ``entry_point`` as ``def f``; raises :class:`Drop`."""
    tree, cls, method, entry = _parse_method(completion, entry_point)
    self_name = _self_name(method)
    sites = _recursion_sites(method, cls, self_name, entry, name)  # self: only ``self.<entry>`` (recursion)
    pos, annotations, returns, stripped = _signature(method, self_name)
    header = f"def {name}({ast.unparse(stripped)}):"
    try:
        body_lines = _source_lines(completion, method, sites, name)
    except (tokenize.TokenError, SyntaxError) as exc:
        raise Drop("syntax_error", str(exc)) from None

    # Module-level names: from the solution's own module code, else from the preamble.
    fn_text = "\n".join([header, *body_lines]) + "\n"
    _check_rewrite(completion, fn_text, entry, self_name, name, stripped)
    imports = _imports_for(fn_text, tree, preamble, name)
    code = "".join(line + "\n" for line in imports) + fn_text
    _check_hints(annotations, returns)
    try:
        norm = normalize_source(code, name)
    except NormalizeError as exc:
        raise Drop("rewrite_mismatch", str(exc)) from None
    n_lines = len(norm.lines) - len(imports)
    if n_lines < min_lines:
        raise Drop("too_short", f"{n_lines} lines")
    return Extracted(code, [a.arg for a in pos], annotations, returns, n_lines, bool(sites))


def _imports_for(fn_text: str, tree: ast.Module, preamble: str, name: str) -> list[str]:
    table = dict(cached_preamble_names(preamble))
    module_code: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                mod = node.module if isinstance(node, ast.ImportFrom) else alias.name
                if alias.name == "*":
                    raise Drop("needs_module_code", f"from {mod} import *")
                local = (alias.asname or alias.name).split(".")[0]
                if (mod or "").split(".")[0] not in sys.stdlib_module_names:
                    module_code[local] = "third_party"
                elif isinstance(node, ast.ImportFrom):
                    table[local] = ("from", mod or "", alias.name)
                else:
                    table[local] = ("import", alias.name, alias.asname or "")
        elif isinstance(node, ast.ClassDef) and node.name != "Solution":
            module_code[node.name] = "class"
        elif not isinstance(node, ast.ClassDef):
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    module_code[n.id] = "code"
                elif isinstance(n, ast.FunctionDef):
                    module_code[n.name] = "code"
    froms: dict[str, list[str]] = {}
    plain: list[str] = []
    assigns: list[str] = []
    for g in sorted(_module_globals(fn_text, name)):
        if g in module_code:
            kind = module_code[g]
            reason = {"third_party": "third_party_module", "class": "needs_helper_class"}.get(kind)
            raise Drop(reason or "needs_module_code", g)
        if g in _BUILTINS:
            continue
        if g not in table:
            raise Drop("undefined_name", g)
        kind, what, orig = table[g]
        if kind == "from":
            froms.setdefault(what, []).append(g if orig == g else f"{orig} as {g}")
        elif kind == "import":
            plain.append(f"import {what}" + (f" as {orig}" if orig else ""))
        elif kind == "assign":
            assigns.append(what)
        else:
            raise Drop("needs_helper_class", g)
    lines = sorted(set(plain)) + [f"from {m} import {', '.join(sorted(ns))}" for m, ns in sorted(froms.items())]
    return lines + assigns


def positional_args(text: str, params: list[str]) -> str:
    """Argument text (``"nums = [2,7], target = 9"``) as canonical positional literals (``"[2, 7], 9"``).

    Raises ``ValueError`` when the text is not literal arguments that fit ``params``.
    """
    args, kwargs = parse_call_args(text)
    if len(args) > len(params):
        raise ValueError(f"{len(args)} positional arguments for {len(params)} parameters")
    values = list(args)
    for p in params[len(args) :]:
        if p not in kwargs:
            raise ValueError(f"missing argument '{p}'")
        values.append(kwargs.pop(p))
    if kwargs:
        raise ValueError(f"unknown argument(s) {', '.join(sorted(kwargs))}")
    try:
        return ", ".join(literal_repr(v) for v in values)
    except NoLiteral as exc:
        raise ValueError(str(exc)) from None


def filter_problems(
    problems: list[dict[str, Any]], *, min_lines: int = 5, name: str = "f"
) -> tuple[list[dict[str, Any]], Counter[str], int]:
    """Funnel step 1 over fetch's problem records: kept function records, drop counts, dropped examples."""
    kept: list[dict[str, Any]] = []
    drops: Counter[str] = Counter()
    bad_examples = 0
    for prob in problems:
        try:
            ex = extract_function(prob["completion"], prob["entry_point"], prob["preamble"], min_lines=min_lines)
        except Drop as d:
            drops[d.reason] += 1
            continue
        examples = []
        for io_pair in prob["input_output"]:
            try:
                examples.append({"args": positional_args(io_pair["input"], ex.params), "output": io_pair["output"]})
            except ValueError:
                bad_examples += 1
        if not examples:
            drops["no_usable_example"] += 1
            continue
        kept.append(
            {
                "task_id": prob["task_id"],
                "question_id": prob.get("question_id"),
                "difficulty": prob.get("difficulty"),
                "entry": name,
                "code": ex.code,
                "params": ex.params,
                "annotations": ex.annotations,
                "returns": ex.returns,
                "n_lines": ex.n_lines,
                "recursive": ex.recursive,
                "examples": examples,
            }
        )
    return kept, drops, bad_examples
