"""A problem's tests as checks the trusted parent judges: the call the sandbox makes, and the expected
value that never leaves the parent.

Every LeetCodeDataset test (one ``assert`` of ``check(candidate)``) has one of three forms; each becomes a
:class:`Check` (counts per split in docs/codegen.md, "The judge"):

* ``assert candidate(ARGS) == LITERAL`` (or ``LITERAL == candidate(ARGS)``): kind ``value``, expected the
  literal. The candidate's return value comes back as plain data and the parent compares with ``==``.
* ``assert is_same_list(candidate(ARGS), list_node(LITERAL))``: kind ``list``, expected the list of values
  (``[]`` for ``list_node([])``, i.e. ``None``). The sandbox walks the returned nodes' ``.next``.
* ``assert is_same_tree(candidate(ARGS), tree_node(LITERAL))``: kind ``tree``, expected the tree's
  level-order form (:func:`level_order`, LeetCode's serialization: present nodes' missing children as
  ``None``, trailing ``None`` dropped). Two trees are the same tree exactly when these forms are equal.

Anything else is a :class:`CheckError` (:func:`~codethinker.codegen.task.make_problem` drops the problem with
that reason). ``ARGS`` goes to the sandbox as text: it may call the preamble's helpers (``list_node``,
``tree_node``) and holds the inputs only.

>>> c = parse_check("assert candidate(nums = [2, 7], target = 9) == [0, 1]")
>>> c.args, c.kind, c.expected, c.passes([0, 1]), c.passes((0, 1))
('nums=[2, 7], target=9', 'value', [0, 1], True, False)
>>> parse_check("assert is_same_tree(candidate(root = tree_node([1, 2])), tree_node([1, None, 2, None]))").expected
[1, None, 2]
"""

from __future__ import annotations

import ast
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Any

from codethinker.errors import CodethinkerError

__all__ = ["KINDS", "Check", "CheckError", "level_order", "parse_check"]

KINDS = ("value", "list", "tree")
_SAME = {"is_same_list": ("list", "list_node"), "is_same_tree": ("tree", "tree_node")}


class CheckError(CodethinkerError, ValueError):
    """A test that is none of the judged forms (see the module docstring)."""


@dataclass(frozen=True)
class Check:
    """One test: ``candidate(args)`` in the sandbox, its plain result compared here with ``expected``."""

    args: str  # the argument text, as inside ``candidate(...)``
    kind: str  # value | list | tree: how the sandbox turns the return value into plain data
    expected: Any  # plain data; never sent to the sandbox

    def passes(self, got: Any) -> bool:
        """Whether the plain value the sandbox returned for this call passes (``==`` on plain builtins,
        as the test's own ``==``; ``list``/``tree``: the node values and shape)."""
        return type(got) is list and got == self.expected if self.kind != "value" else got == self.expected


class _Inf(ast.NodeTransformer):
    """``inf`` (the preamble's ``inf = float('inf')``, in 163 expected values of the test splits) as a
    constant, which ``ast.literal_eval`` then reads (``-inf`` too)."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Constant(float("inf")) if node.id == "inf" else node


def _literal(node: ast.expr, what: str) -> Any:
    try:
        return ast.literal_eval(_Inf().visit(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CheckError(f"{what} is not a literal: {ast.unparse(node)[:80]}") from None


def _candidate_args(node: ast.expr, source: str) -> str | None:
    """The argument text of ``candidate(...)``, or None when ``node`` is not such a call."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate"):
        return None
    parts = [ast.get_source_segment(source, a) or ast.unparse(a) for a in node.args]
    for kw in node.keywords:
        value = ast.get_source_segment(source, kw.value) or ast.unparse(kw.value)
        parts.append(f"**{value}" if kw.arg is None else f"{kw.arg}={value}")
    return ", ".join(parts)


def level_order(values: list) -> list:
    """The level-order form of ``tree_node(values)`` (the preamble's builder, read as data): the values
    breadth first, ``None`` for a missing child of a present node, trailing ``None`` dropped.

    >>> level_order([1, None, 2, 3]), level_order([]), level_order([5, None, None, None])
    ([1, None, 2, 3], [], [5])
    """
    if not values:
        return []
    nodes: list[list[Any]] = [[values[0], None, None]]  # val, left, right (indices into nodes)
    queue, i = deque([0]), 1
    while queue:
        k = queue.popleft()
        for side in (1, 2):
            if i < len(values) and values[i] is not None:
                nodes.append([values[i], None, None])
                nodes[k][side] = len(nodes) - 1
                queue.append(len(nodes) - 1)
            i += 1
    out: list[Any] = []
    todo: deque[int | None] = deque([0])
    while todo:
        k = todo.popleft()
        if k is None:
            out.append(None)
            continue
        out.append(nodes[k][0])
        todo.extend((nodes[k][1], nodes[k][2]))
    while out and out[-1] is None:
        out.pop()
    return out


def parse_check(test: str) -> Check:
    """The :class:`Check` of one test statement (``assert ...``); :class:`CheckError` says why not."""
    with warnings.catch_warnings():  # invalid escapes in string literals
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(test)
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            raise CheckError(f"the test does not parse: {type(exc).__name__}") from None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert) or tree.body[0].msg is not None:
        raise CheckError("the test is not one assert statement")
    expr = tree.body[0].test
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.Eq):
        left, right = expr.left, expr.comparators[0]
        args = _candidate_args(left, test)
        if args is None:
            args, right = _candidate_args(right, test), left
        if args is not None:
            return Check(args, "value", _literal(right, "the expected value"))
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in _SAME
        and len(expr.args) == 2
        and not expr.keywords
    ):
        kind, builder = _SAME[expr.func.id]
        args = _candidate_args(expr.args[0], test)
        made = expr.args[1]
        if (
            args is not None
            and isinstance(made, ast.Call)
            and isinstance(made.func, ast.Name)
            and made.func.id == builder
            and len(made.args) == 1
            and not made.keywords
        ):
            values = _literal(made.args[0], f"{builder}'s argument")
            if type(values) is not list:
                raise CheckError(f"{builder}'s argument is not a list")
            return Check(args, kind, values if kind == "list" else level_order(values))
    raise CheckError(f"the test is none of the judged forms: {test[:80]}")
