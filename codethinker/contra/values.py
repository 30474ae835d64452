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

``parse_literal`` reads model output with the grammar of ``ast.literal_eval`` and work linear in
the text: white space only where Python's tokenizer allows it (``PY_SPACE``; ``\\xa0`` or
``\\v`` are not white space), no decimal number longer than ``MAX_INT_DIGITS`` digits (CPython
converts those in quadratic time when ``sys.set_int_max_str_digits(0)`` is in force), and no
set or dict with more than ``MAX_SAME_HASH`` members of one hash value (building one is
quadratic in them). ``lex`` finds string literals and comments in one left-to-right pass.

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
import re
from typing import Any, NoReturn

from codethinker.sandbox import register_runner

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_SAME_HASH",
    "PY_SPACE",
    "NoLiteral",
    "canonicalize",
    "check_numbers",
    "lex",
    "literal_from_node",
    "literal_repr",
    "parse_call_args",
    "parse_literal",
    "run_call",
    "stable_repr",
    "strict_equal",
]

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
    try:  # a frozenset element or key canonicalizes to an unhashable set: no literal form
        if t is set or t is frozenset:
            return {canonicalize(v, d, path) for v in value}
        if t in (dict, collections.Counter, collections.OrderedDict, collections.defaultdict):
            return {canonicalize(k, d, path): canonicalize(v, d, path) for k, v in dict.items(value)}
    except TypeError as exc:
        raise NoLiteral(f"{t.__name__} holds a value with no hashable literal form ({exc})") from None
    raise NoLiteral(f"{t.__name__} has no literal form")


def literal_repr(value: Any) -> str:
    """``repr`` of the canonical form, with every set's members sorted by their text (``repr`` itself
    follows the hash order, which differs between processes: the sandbox's fixed ``PYTHONHASHSEED`` does
    not reach the parent that renders the truth, so the same trace came back as ``{'[]', '()'}`` in one run
    and ``{'()', '[]'}`` in the next); raises :class:`NoLiteral` if there is none.

    >>> literal_repr({"{}", "()", "[]"}), literal_repr({"k": frozenset({3, 1})}), literal_repr(set())
    ("{'()', '[]', '{}'}", "{'k': {1, 3}}", 'set()')
    """
    canon = canonicalize(value)
    try:
        return stable_repr(canon)
    except ValueError as exc:  # int with more digits than sys.get_int_max_str_digits()
        raise NoLiteral(str(exc)) from exc


_LEAVES = frozenset({*_SCALARS, float})
_FLAT = frozenset({list, tuple, dict})


def stable_repr(v: Any) -> str:
    """``repr`` of a canonical value with sets in sorted member order (the rest exactly as ``repr``)."""
    t = type(v)
    if t is set:
        return "{" + ", ".join(sorted(stable_repr(x) for x in v)) + "}" if v else "set()"
    if t in _FLAT and all(type(x) in _LEAVES for x in (v.values() if t is dict else v)):
        return repr(v)  # no set inside (keys are hashable, so never sets): C's repr, the same text
    if t is list:
        return "[" + ", ".join(stable_repr(x) for x in v) + "]"
    if t is tuple:
        return "(" + ", ".join(stable_repr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if t is dict:
        return "{" + ", ".join(f"{stable_repr(k)}: {stable_repr(x)}" for k, x in v.items()) + "}"
    return repr(v)


PY_SPACE = " \t\f\r\n"  # the characters Python's tokenizer skips between tokens (\v, \xa0 are errors)
MAX_INT_DIGITS = 4300  # CPython's default int max str digits: every truth value's ints fit
MAX_SAME_HASH = 32  # members of one set or dict that may share a hash value

_SPECIAL = re.compile(r"['\"#]")  # where a string literal or a comment may start
_STRING_END = {
    "'": re.compile(r"[\\'\r\n]"),
    '"': re.compile(r'[\\"\r\n]'),
    "'''": re.compile(r"\\|'''"),
    '"""': re.compile(r'\\|"""'),
}
_EOL = re.compile(r"[\r\n]")
_DIGITS = re.compile(r"[0-9][0-9_]*")
_PREFIX = frozenset("rRbBuUfF")


def _is_name_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or ord(ch) > 127


def _string_prefix(text: str, quote: int) -> str:
    """The letters before ``text[quote]`` that Python reads as a string prefix (``rb``, ``f``...)."""
    start = quote
    while start > 0 and quote - start < 3 and _is_name_char(text[start - 1]):
        start -= 1
    prefix = text[start:quote]
    if len(prefix) > 2 or (start > 0 and _is_name_char(text[start - 1])) or not set(prefix) <= _PREFIX:
        return ""  # a name followed by a string: a syntax error, not a prefix
    return prefix


def _string_end(text: str, quote: int) -> int:
    """End of the string literal whose quote starts at ``text[quote]``; ``ValueError`` if unterminated.

    Python's rule for every kind of string (raw ones too): a backslash takes the next character (a
    CRLF counts as one) with it; a one-quote string may not hold a raw line end.
    """
    delim = text[quote] * 3 if text.startswith(text[quote] * 3, quote) else text[quote]
    find = _STRING_END[delim]
    i = quote + len(delim)
    while (m := find.search(text, i)) is not None:
        c = m.group()
        if c == "\\":
            i = m.end() + (2 if text.startswith("\r\n", m.end()) else 1)
        elif c in "\r\n":
            break
        else:
            return m.end()
    raise ValueError("not a literal: unterminated string literal")


def lex(text: str) -> list[tuple[str, int, int]]:
    """``(kind, start, end)`` spans covering ``text`` in order, ``kind`` one of ``code``, ``str`` (a
    string literal, without its prefix letters), ``fstr`` (an f-string) or ``comment``; one pass,
    linear in ``len(text)``. Raises ``ValueError`` for an unterminated string literal.

    >>> lex("{'a': 1}  # x")
    [('code', 0, 1), ('str', 1, 4), ('code', 4, 10), ('comment', 10, 13)]
    """
    spans: list[tuple[str, int, int]] = []
    i = 0
    while (m := _SPECIAL.search(text, i)) is not None:
        at = m.start()
        if at > i:
            spans.append(("code", i, at))
        if m.group() == "#":
            eol = _EOL.search(text, at)
            i = eol.start() if eol is not None else len(text)
            spans.append(("comment", at, i))
            continue
        i = _string_end(text, at)
        spans.append(("fstr" if "f" in _string_prefix(text, at).lower() else "str", at, i))
    if i < len(text):
        spans.append(("code", i, len(text)))
    return spans


def check_numbers(text: str) -> None:
    """``ValueError`` if Python would read a decimal number of more than ``MAX_INT_DIGITS`` digits
    in ``text`` (or ``text`` holds an unterminated string). Conservative: any run of digits outside
    strings and comments counts (in a name or a hex number too), and from the first f-string on,
    digits count wherever they stand, since the expressions inside one are parsed as code."""
    for kind, start, end in lex(text):
        if kind == "fstr":
            end = len(text)
        elif kind != "code":
            continue
        for m in _DIGITS.finditer(text, start, end):
            if m.end() - m.start() > MAX_INT_DIGITS and len(m.group().replace("_", "")) > MAX_INT_DIGITS:
                raise ValueError(f"not a literal: a number of more than {MAX_INT_DIGITS} digits")
        if kind == "fstr":
            return


def _malformed(node: ast.AST) -> NoReturn:
    raise ValueError(f"not a literal: {type(node).__name__}")


def _number(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex):
        return node.value
    _malformed(node)


def _signed(node: ast.AST) -> Any:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _number(node.operand)
        return +value if isinstance(node.op, ast.UAdd) else -value
    return _number(node)


def _hash_spread(members: list[Any]) -> list[Any]:
    """``members`` unchanged, or ``ValueError`` when more than ``MAX_SAME_HASH`` share a hash value
    (or ``TypeError`` for an unhashable one). Counting hash values is linear: distinct hash values,
    being ints below 2**61 - 1, hash to themselves."""
    if len(members) > MAX_SAME_HASH:
        counts = collections.Counter(hash(m) for m in members)
        if max(counts.values()) > MAX_SAME_HASH:
            raise ValueError(f"not a literal: more than {MAX_SAME_HASH} members with one hash value")
    return members


def literal_from_node(node: ast.AST) -> Any:
    """The value of a literal expression node: exactly the forms ``ast.literal_eval`` accepts
    (constants, tuples, lists, sets, ``set()``, dicts, signed numbers, ``a + bj``), with
    :func:`_hash_spread` guarding every set and dict. Raises ``ValueError`` or ``TypeError``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple([literal_from_node(e) for e in node.elts])
    if isinstance(node, ast.List):
        return [literal_from_node(e) for e in node.elts]
    if isinstance(node, ast.Set):
        return set(_hash_spread([literal_from_node(e) for e in node.elts]))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set":
        if node.args or node.keywords:
            _malformed(node)
        return set()
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):  # ``**mapping``
            _malformed(node)
        keys = _hash_spread([literal_from_node(k) for k in node.keys if k is not None])
        return dict(zip(keys, [literal_from_node(v) for v in node.values], strict=True))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        left, right = _signed(node.left), _number(node.right)
        if type(left) in (int, float) and type(right) is complex:
            return left + right if isinstance(node.op, ast.Add) else left - right
        _malformed(node)
    return _signed(node)


def parse_literal(text: str, max_chars: int = 1_000_000) -> Any:
    """A literal read from ``text`` (outer ``PY_SPACE`` ignored) with the grammar of
    ``ast.literal_eval`` and the bounds of the module docstring; ``ValueError`` on anything else.

    Never executes code; deep nesting, huge numbers and junk all become ``ValueError``.
    """
    if len(text) > max_chars:
        raise ValueError(f"literal longer than {max_chars} characters")
    body = text.strip(PY_SPACE)
    check_numbers(body)
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a literal: {type(exc).__name__}") from None
    try:
        return literal_from_node(tree.body)
    except (TypeError, MemoryError, RecursionError) as exc:  # ValueErrors say why already
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
    """Type-strict, element-by-element equality; floats with ``math.isclose``.

    Hash tables are built from ``b`` only (the reward passes the truth there) and ``a``'s members
    are only looked up, so members of ``a`` that all hash alike cost linear time, not quadratic.
    """
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
    if ta is set or ta is frozenset:  # a set's members differ, so their signatures do: a bijection
        if len(a) != len(b):
            return False
        bsigs = {_key_sig(x) for x in b}
        return all(_key_sig(x) in bsigs for x in a)
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
    check_numbers(text)
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
            args.append(literal_from_node(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs are not supported")
            if kw.arg in kwargs:
                raise ValueError(f"keyword argument repeated: {kw.arg}")
            kwargs[kw.arg] = literal_from_node(kw.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"input arguments must be literals: {exc}") from None
    return tuple(args), kwargs


def run_call(fn: Any, args: tuple, kwargs: dict, options: dict) -> Any:
    """The sandbox's ``"call"`` runner: the canonical literal form of ``fn(*args, **kwargs)``."""
    return canonicalize(fn(*args, **kwargs))


register_runner("call", "codethinker.contra.values:run_call")
