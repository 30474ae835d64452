"""How alike two programs are, as keys: the text, the text with names abstracted, the shape.

* :func:`text_key`: the program as parsed and unparsed (formatting and comments do not count);
* :func:`renamed_key`: every name the program binds (variables, parameters, its functions' names) replaced
  by its first-use index, constants kept: a program and its variables renamed have the same key (the
  names it only reads, ``len`` or ``sorted``, and attributes, ``.append``, are kept: they are operations);
* :func:`shape_key`: the renamed program with every constant replaced by its type: the same
  statements and expressions in the same structure, whatever the names and numbers.

The held-out split (:func:`split_by_shape`) and the overlap audit (:func:`overlap`) are built on them: a
held-out program whose shape appears nowhere in training is unlike the training data by construction, not
only by name.

>>> a = "def f(xs):\\n    t = 0\\n    for v in xs:\\n        t += v * 2\\n    return t\\n"
>>> b = "def g(nums):\\n    acc = 0\\n    for x in nums:\\n        acc += x * 2\\n    return acc\\n"
>>> c = b.replace("x * 2", "x * 3")
>>> renamed_key(a) == renamed_key(b), renamed_key(b) == renamed_key(c), shape_key(a) == shape_key(c)
(True, False, True)
"""

from __future__ import annotations

import ast
import hashlib
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from codethinker.data.sft import split_by_function

__all__ = [
    "KEYS",
    "overlap",
    "overlap_audit",
    "renamed_key",
    "shape_key",
    "size",
    "split_by_shape",
    "split_generated",
    "text_key",
]


def _parse(code: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


def _bound(tree: ast.AST) -> set[str]:
    """The names ``tree`` binds: parameters, assignment and loop targets, functions, imports."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


class _Rename(ast.NodeTransformer):
    """Bound names by first use (``v0``, ``v1``, ...); constants as their type's name when ``consts``."""

    def __init__(self, bound: set[str], consts: bool) -> None:
        self.names: dict[str, str] = {}
        self.bound, self.consts = bound, consts

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}") if name in self.bound else name

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg, node.annotation = self._name(node.arg), None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name, node.returns = self._name(node.name), None
        self.generic_visit(node)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(type(node.value).__name__) if self.consts else node


def _key(tree: ast.AST) -> str:
    return hashlib.sha1(ast.dump(tree, annotate_fields=False).encode()).hexdigest()


def text_key(code: str) -> str:
    """The program as parsed (formatting and comments do not count)."""
    return _key(_parse(code))


def renamed_key(code: str) -> str:
    """The program with the names it binds numbered by first use; constants kept."""
    tree = _parse(code)
    return _key(_Rename(_bound(tree), consts=False).visit(tree))


def shape_key(code: str) -> str:
    """The program with the names it binds numbered by first use and constants replaced by their type."""
    tree = _parse(code)
    return _key(_Rename(_bound(tree), consts=True).visit(tree))


KEYS: dict[str, Callable[[str], str]] = {"text": text_key, "renamed": renamed_key, "shape": shape_key}


def _order(keys: Iterable[str], seed: int) -> list[str]:
    return sorted(set(keys), key=lambda k: hashlib.sha256(f"{seed}\x1f{k}".encode()).digest())


def size(code: str) -> int:
    """The program's statements (every statement node, nested ones included): the same for every program of
    a shape."""
    return sum(isinstance(node, ast.stmt) for node in ast.walk(_parse(code)))


def _quotas(counts: dict[int, int], n: int) -> dict[int, int]:
    """``n`` split over the strata in proportion to ``counts`` (largest remainders)."""
    total = sum(counts.values()) or 1
    raw = {k: n * c / total for k, c in counts.items()}
    out = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: (out[k] - raw[k], k))[: n - sum(out.values())]:
        out[k] += 1
    return out


def split_by_shape(
    codes: dict[str, str], seed: int, n: int, avoid: frozenset[str] = frozenset()
) -> tuple[set[str], set[str]]:
    """Hold out about ``n`` programs (``codes``: id -> source) by whole shapes, as many of each size
    (:func:`size`) as the data has in proportion, so that the held-out programs are as long as the others:
    within a size, shapes in an order fixed by (seed, shape), each taken with every program of it while it
    fits in what is left of that size's share, none of the shapes in ``avoid`` (those of other programs that
    train). Returns (held-out ids, the other ids): no shape has programs on both sides. A function of the
    sources, ``avoid`` and the seed only."""
    by_shape: dict[str, list[str]] = {}
    shape_size: dict[str, int] = {}
    for pid in sorted(codes):
        key = shape_key(codes[pid])
        by_shape.setdefault(key, []).append(pid)
        if key not in shape_size:
            shape_size[key] = size(codes[pid])
    counts: dict[int, int] = {}
    for key, ids in by_shape.items():
        counts[shape_size[key]] = counts.get(shape_size[key], 0) + len(ids)
    left = _quotas(counts, n)
    held: set[str] = set()
    for shape in _order(by_shape, seed):
        k = shape_size[shape]
        if shape not in avoid and len(by_shape[shape]) <= left[k]:
            held.update(by_shape[shape])
            left[k] -= len(by_shape[shape])
    return held, set(codes) - held


def overlap(held: Sequence[str], train: Iterable[str]) -> dict[str, Any]:
    """How many of the ``held`` programs have their text, renamed text or shape among the ``train`` ones."""
    train = list(train)
    out: dict[str, Any] = {"n": len(held)}
    for name, key in KEYS.items():
        seen = {key(c) for c in train}
        out[name] = sum(key(c) in seen for c in held)
    return out


def split_generated(
    samples: list[dict], seed: int, n_ood: int, n_id: int, n_grpo: int, others: Iterable[str] = ()
) -> dict[str, list]:
    """Generated programs, held out by shape before any other split: ``shape_disjoint`` takes about ``n_ood``
    functions by whole shapes (:func:`split_by_shape`; never a shape of the ``others``, the programs that
    may train beside them), so no program of those shapes trains; from the other functions, in an order
    fixed by (seed, task_id), ``in_distribution`` takes the first ``n_id`` and ``grpo`` the next
    ``n_grpo``; ``sft`` the rest."""
    codes = {s["task_id"]: s["code"] for s in samples}
    ood, _ = split_by_shape(codes, seed, n_ood, frozenset(shape_key(c) for c in others))
    order, _ = split_by_function([s for s in samples if s["task_id"] not in ood], seed, halves=1)
    fns = list(dict.fromkeys(s["task_id"] for s in order))
    held, grpo = set(fns[:n_id]), set(fns[n_id : n_id + n_grpo])
    pick = lambda keep: [s for s in order if keep(s["task_id"])]  # noqa: E731
    return {
        "sft": pick(lambda t: t not in held and t not in grpo),
        "grpo": pick(grpo.__contains__),
        "in_distribution": pick(held.__contains__),
        "shape_disjoint": [s for s in samples if s["task_id"] in ood],
    }


def overlap_audit(held: dict[str, list[dict]], train: list[dict], progress: str | None = None) -> dict[str, dict]:
    """Per held-out set: how many of its programs have their text, renamed text or shape in training (the
    training programs' keys computed once for every set; ``progress``: a bar over them with this label)."""
    from tqdm.auto import tqdm

    train_codes = list(dict.fromkeys(s["code"] for s in train))
    seen: dict[str, set] = {name: set() for name in KEYS}
    for code in tqdm(train_codes, desc=progress, unit="program", disable=progress is None, file=sys.stderr):
        for name, key in KEYS.items():
            seen[name].add(key(code))
    return {
        kind: {"n": len(rows), **{name: sum(key(s["code"]) in seen[name] for s in rows) for name, key in KEYS.items()}}
        for kind, rows in held.items()
    }
