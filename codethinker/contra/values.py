"""Canonical literal values and the project's type-strict equality (SPEC §3).

A value has a *literal form* when it is built only from ``None``, ``bool``, ``int``,
finite ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``, ``dict`` and
``set``, so that ``ast.literal_eval(repr(v))`` gives it back. ``canonicalize`` maps the
containers the paper's programs use to that form (deque -> list; Counter,
defaultdict, OrderedDict -> dict; frozenset -> set) and raises :class:`NoLiteral`
for everything else (functions, iterators, objects, ``nan``/``inf``, cycles).

``strict_equal`` is the equality used for LOCALS and the reward's answer check:
``1``, ``True`` and ``1.0`` are three different values; floats compare with
``math.isclose(rel_tol=1e-6, abs_tol=1e-9)``; everything else exactly.

>>> from collections import Counter, deque
>>> canonicalize({"c": Counter("aab"), "q": deque([1, 2])})
{'c': {'a': 2, 'b': 1}, 'q': [1, 2]}
>>> strict_equal([1, 0.30000000000000004], [1, 0.3]), strict_equal(1, True)
(True, False)
"""

from __future__ import annotations

import ast
import collections
import math
from typing import Any

__all__ = ["NoLiteral", "canonicalize", "literal_repr", "parse_call_args", "parse_literal", "strict_equal"]

_SCALARS = (type(None), bool, int, str, bytes, complex)
MAX_DEPTH = 100  # deeper values are treated as having no literal form
_BIG_INT_BITS = 12_000  # ints this long may exceed the int-to-str digit limit: check them


class NoLiteral(ValueError):
    """The value has no literal form (a function, an iterator, an object, nan, ...)."""


def canonicalize(value: Any, _depth: int = 0, _path: frozenset[int] = frozenset()) -> Any:
    """Return a plain-builtin copy of ``value`` or raise :class:`NoLiteral`."""
    t = type(value)
    if t is int and value.bit_length() > _BIG_INT_BITS:
        try:
            str(value)
        except ValueError:
            raise NoLiteral("int with more digits than sys.get_int_max_str_digits()") from None
    if t in _SCALARS:
        if t is complex and not (math.isfinite(value.real) and math.isfinite(value.imag)):
            raise NoLiteral("complex with nan/inf")
        return value
    if t is float:
        if not math.isfinite(value):
            raise NoLiteral(f"float {value!r} has no literal form")
        return value
    if _depth >= MAX_DEPTH:
        raise NoLiteral("value nested too deeply")
    vid = id(value)
    if vid in _path:
        raise NoLiteral("value contains itself")
    path = _path | {vid}
    d = _depth + 1
    if t is list or t is collections.deque:
        return [canonicalize(v, d, path) for v in value]
    if t is tuple:
        return tuple(canonicalize(v, d, path) for v in value)
    if t is set or t is frozenset:
        return {canonicalize(v, d, path) for v in value}
    if t in (dict, collections.Counter, collections.OrderedDict, collections.defaultdict):
        return {canonicalize(k, d, path): canonicalize(v, d, path) for k, v in dict.items(value)}
    raise NoLiteral(f"{t.__name__} has no literal form")


def literal_repr(value: Any) -> str:
    """``repr`` of the canonical form; raises :class:`NoLiteral` if there is none."""
    canon = canonicalize(value)
    try:
        return repr(canon)
    except ValueError as exc:  # int with more digits than sys.get_int_max_str_digits()
        raise NoLiteral(str(exc)) from exc


def parse_literal(text: str, max_chars: int = 1_000_000) -> Any:
    """``ast.literal_eval`` with a size bound; raises ``ValueError`` on anything else.

    Never executes code; deep nesting, huge numbers and junk all become ``ValueError``.
    """
    if len(text) > max_chars:
        raise ValueError(f"literal longer than {max_chars} characters")
    try:
        return ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError, AttributeError) as exc:
        raise ValueError(f"not a literal: {type(exc).__name__}") from None


def _key_sig(k: Any) -> Any:
    """A hashable signature that tells ``1``, ``True`` and ``1.0`` apart (for dict keys, sets)."""
    t = type(k)
    if t is tuple:
        return (t, tuple(_key_sig(x) for x in k))
    if t is frozenset:
        return (t, frozenset(_key_sig(x) for x in k))
    return (t, k)


def strict_equal(a: Any, b: Any) -> bool:
    """Type-strict, element-by-element equality; floats with ``math.isclose``."""
    if a is b:  # literal values hold no nan, so an object equals itself
        return True
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is float:
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if ta is complex:
        return strict_equal(a.real, b.real) and strict_equal(a.imag, b.imag)
    if ta is list or ta is tuple:
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=False))
    if ta is dict:
        if len(a) != len(b):
            return False
        bmap = {_key_sig(k): v for k, v in b.items()}
        if len(bmap) != len(b):
            return False
        for k, v in a.items():
            sig = _key_sig(k)
            if sig not in bmap or not strict_equal(v, bmap[sig]):
                return False
        return True
    if ta is set or ta is frozenset:
        return len(a) == len(b) and {_key_sig(x) for x in a} == {_key_sig(x) for x in b}
    try:
        return bool(a == b)
    except Exception:
        return False


def parse_call_args(text: str, max_chars: int = 1_000_000) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Parse argument text as it stands inside ``f(...)`` into literal ``(args, kwargs)``.

    Accepts positional and keyword forms (``"[1, 2], 3"``, ``"nums = [2,7], target = 9"``) and
    CRUXEval's trailing-comma tuples. Only literals are accepted; nothing is executed.

    >>> parse_call_args("nums = [2,7], target = 9")
    ((), {'nums': [2, 7], 'target': 9})
    >>> parse_call_args("(1, ), 'a'")
    (((1,), 'a'), {})
    """
    if len(text) > max_chars:
        raise ValueError(f"input longer than {max_chars} characters")
    try:
        node = ast.parse(f"_f({text})", mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise ValueError(f"input is not valid Python argument text: {exc}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id != "_f":
        raise ValueError("input is not a plain argument list")
    try:
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise ValueError("starred arguments are not supported")
            args.append(ast.literal_eval(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs are not supported")
            if kw.arg in kwargs:
                raise ValueError(f"keyword argument repeated: {kw.arg}")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"input arguments must be literals: {exc}") from None
    return tuple(args), kwargs
