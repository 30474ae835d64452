"""The wire format of frames a sandbox child sends to the parent (child -> parent only).

Not public API. The child may be compromised, so the parent cannot trust a frame: it is
bounded *before* it is decoded (size, nesting, number of values) and by what decoding may
build (no shared references, no hash flooding). A frame is ASCII JSON; a list is a JSON
array and every other non-JSON value is a one-key JSON object whose key names its type:

======================  ==============================================  ======================
value                   encoding                                        decoded as
======================  ==============================================  ======================
``None``, ``bool``      ``null``, ``true``, ``false``                   the same
``int`` (< 2**64)       a JSON number                                   ``int``
``int`` (larger)        ``{"i":"<hex digits>"}``                        ``int(hex, 16)``
``float``               ``repr``, ``NaN``, ``Infinity``, ``-Infinity``  a new ``float``
``complex``             ``{"c":"<real> <imag>"}`` (``float`` reprs)     ``complex``
``str``                 a JSON string (escapes below)                   ``str``
``str`` + surrogates    ``{"u":"<base64 of UTF-8, surrogatepass>"}``    ``str`` [1]_
``bytes``               ``{"b":"<base64>"}``                            ``bytes``
``list``                ``[...]``                                       ``list``
``tuple``               ``{"t":[...]}``                                 ``tuple``
``set``, ``frozenset``  ``{"s":[...]}``, ``{"f":[...]}``                ``set``, ``frozenset``
``dict``                ``{"d":[k1,v1,k2,v2,...]}``                     ``dict``
======================  ==============================================  ======================

.. [1] JSON would join an escaped high and low surrogate into one character.

Inside strings, ``" \\ [ ] { } , :`` are always written as ``\\uXXXX`` and there is no white
space, so the bytes of a frame outside its strings are found without parsing it. There are
no back-references: the decoded object graph is at most proportional to the frame (measured
at most 26 bytes of memory per frame byte, for a list of empty sets; 22 for empty lists).
Anything else (subclasses of these types too) cannot be encoded: :class:`WireError`.

Limits (keyword arguments of :func:`encode` / :func:`decode`; these are the defaults):

====================  ===========  =====================================================
constant              value        meaning
====================  ===========  =====================================================
``MAX_FRAME_BYTES``   8 MiB        encoded size: :func:`encode` refuses as soon as it is
                                   passed (a value repeating one large object is not
                                   expanded without bound), :func:`decode` refuses longer
``MAX_DEPTH``         116          nested containers (lists, tuples, sets, frozensets,
                                   dicts): ``values.MAX_DEPTH`` (100) plus room for the
                                   frame around a value
``MAX_ITEMS``         2,097,152    values in a frame (scalars and containers), counted
                                   from its commas and brackets before it is parsed
``MAX_EQUAL_HASHES``  32           elements of one set, frozenset or dict (keys) that may
                                   share one hash; colliding elements may not hold a
                                   frozenset
====================  ===========  =====================================================

:func:`decode` is linear in ``len(data)``. Before parsing, C-level byte operations check
that every string is free of raw structural bytes, that every JSON object is exactly one
known key, the nesting depth and the number of values. ``json`` (C) then parses; each
tagged object is built by a hook as soon as its contents are (children first, no
recursion of our own). Before a set, frozenset or dict is built the hashes of its
elements are compared: int, float, complex and tuple hashes are easy to make collide (str
hashes too where ``PYTHONHASHSEED`` is fixed), and ``n`` equal hashes cost ``n**2 / 2``
equality checks, so at most ``MAX_EQUAL_HASHES`` may be equal; and an element holding a
frozenset may not share its hash with another (equality of nested frozensets of equal
hashes is superlinear). Every violation raises :class:`WireError` (a ``ValueError``).

The format checks the *encoding*, not the *shape*: ``{"status": "ok", "value": 1}`` decodes
fine, and whether it is a valid result frame is the caller's question. Decoded values may
also hold what no canonical value holds (frozensets, nan, a 10**6-element set), within the
limits above.

>>> decode(encode({"value": (1, 2.5, {3}), "dirty": None}))
{'value': (1, 2.5, {3}), 'dirty': None}
"""

from __future__ import annotations

import binascii
import collections
import itertools
import json
import re
import sys
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

from codethinker.contra.values import MAX_DEPTH as VALUE_MAX_DEPTH

__all__ = ["MAX_DEPTH", "MAX_EQUAL_HASHES", "MAX_FRAME_BYTES", "MAX_ITEMS", "WireError", "decode", "encode"]

MAX_FRAME_BYTES = 8 * 1024 * 1024
MAX_DEPTH = VALUE_MAX_DEPTH + 16
MAX_ITEMS = 1 << 21
MAX_EQUAL_HASHES = 32

_SMALL_INT = 1 << 64  # ints with abs() below this are JSON numbers, larger ones hex strings
_INT_DIGITS = 20  # the longest decimal int a frame holds (2**64 - 1 has 20 digits)
_INT_DIGITS_DEFAULT = 4300  # sys.get_int_max_str_digits() of a default interpreter

_OPEN = {tuple: '{"t":[', set: '{"s":[', frozenset: '{"f":[', dict: '{"d":['}
_NON_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
_STRUCTURAL_ESCAPES = tuple((c, f"\\u{ord(c):04x}") for c in "[]{},:")


class WireError(ValueError):
    """A value that cannot be encoded, or a frame that is not a valid, bounded encoding."""


# --------------------------------------------------------------------------- encoding (child)
def _str_text(x: str) -> str:
    """``x`` as an ASCII JSON string with none of ``" \\ [ ] { } , :`` between its quotes except
    as ``\\uXXXX`` (for a str without surrogates)."""
    text = encode_basestring_ascii(x)
    if '"' in x or "\\" in x or "[" in x or "]" in x or "{" in x or "}" in x or "," in x or ":" in x:
        body = text[1:-1].replace("\\\\", "\\u005c").replace('\\"', "\\u0022")
        for c, esc in _STRUCTURAL_ESCAPES:
            body = body.replace(c, esc)
        text = f'"{body}"'
    return text


def _float_text(x: float) -> str:
    r = float.__repr__(x)
    return _NON_FINITE.get(r, r)


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _too_long(max_bytes: int) -> WireError:
    return WireError(f"encoded value exceeds max_bytes ({max_bytes} bytes)")


def _no_room(what: str, room: int) -> WireError:
    return WireError(f"encoded value exceeds max_bytes: {what} needs more than the {room} bytes left")


def _scalar_text(x: Any, t: type, room: int) -> str:
    """The text of a value that is not a container; ``room``: bytes left for it."""
    if t is str:
        if len(x) + 2 > room:  # before escaping: the text is at least this long
            raise _no_room(f"a str of {len(x)} chars", room)
        if x.isascii():
            return _str_text(x)
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:  # surrogates: JSON would join an escaped high and low one
            data = x.encode("utf-8", "surrogatepass")
        else:
            return _str_text(x)
        if len(data) * 4 // 3 > room:
            raise _no_room(f"a str of {len(x)} chars", room)
        return f'{{"u":"{_b64(data)}"}}'
    if t is int:
        if -_SMALL_INT < x < _SMALL_INT:
            return int.__repr__(x)
        if x.bit_length() // 4 > room:
            raise _no_room(f"an int of {x.bit_length()} bits", room)
        return f'{{"i":"{x:x}"}}'
    if t is float:
        return _float_text(x)
    if x is None:
        return "null"
    if t is bool:
        return "true" if x else "false"
    if t is bytes:
        if len(x) * 4 // 3 > room:
            raise _no_room(f"bytes of length {len(x)}", room)
        return f'{{"b":"{_b64(x)}"}}'
    if t is complex:
        return f'{{"c":"{float.__repr__(x.real)} {float.__repr__(x.imag)}"}}'
    raise WireError(f"{t.__name__} is not plain data")


_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})


def _put(x: Any, out: list[str], size: int, depth: int, limits: tuple[int, int]) -> int:
    """Append the text of ``x`` to ``out``; return the size written so far. Refuses as soon as
    ``limits = (max_bytes, max_depth)`` is passed (so the recursion is capped by max_depth)."""
    max_bytes, max_depth = limits
    t = type(x)
    if t not in _CONTAINERS:
        text = _scalar_text(x, t, max_bytes - size)
        size += len(text)
        if size > max_bytes:
            raise _too_long(max_bytes)
        out.append(text)
        return size
    if depth >= max_depth:
        raise WireError(f"value nested deeper than {max_depth}")
    depth += 1
    out.append("[" if t is list else _OPEN[t])
    size += 1 if t is list else 7  # the brackets, less the comma the closing one replaces
    items = itertools.chain.from_iterable(x.items()) if t is dict else x
    for item in items:
        ti = type(item)
        if ti is int and -_SMALL_INT < item < _SMALL_INT:  # the most common items, inline
            text = int.__repr__(item)
        elif ti is str and item.isascii() and len(item) + 2 <= max_bytes - size:
            text = f'"{item}"' if item.isidentifier() else _str_text(item)
        elif ti in _CONTAINERS:
            size = _put(item, out, size, depth, limits)
            text = ""
        else:
            text = _scalar_text(item, ti, max_bytes - size)
        if text:
            size += len(text)
            out.append(text)
        size += 1
        if size > max_bytes:
            raise _too_long(max_bytes)
        out.append(",")
    if out[-1] == ",":
        out[-1] = "]" if t is list else "]}"
    else:
        out.append("]" if t is list else "]}")
    return size


def encode(obj: Any, *, max_bytes: int = MAX_FRAME_BYTES, max_depth: int = MAX_DEPTH) -> bytes:
    """The frame body for ``obj`` (plain data only, see the module docstring).

    Raises :class:`WireError` for anything else, past ``max_bytes`` (checked while encoding,
    so a value that repeats one large object costs at most ``max_bytes``) and past
    ``max_depth`` nested containers (so a value that contains itself is refused too).
    """
    out: list[str] = []
    try:
        _put(obj, out, 0, 0, (max_bytes, max_depth))
    except RecursionError:
        raise WireError("value nested too deeply for the interpreter's recursion limit") from None
    data = "".join(out).encode("ascii")
    if len(data) > max_bytes:  # the running size is exact but for one byte per empty container
        raise _too_long(max_bytes)
    return data


# --------------------------------------------------------------------------- decoding (parent)
_KEEP_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{},:')  # deleted by translate
_ARRAYS_ONLY = bytes(b for b in range(256) if b not in b"[]")
_ARRAY_STEPS = bytes.maketrans(b"[]", b"\x01\xff")  # +1 / -1 as signed chars
_NESTING_ONLY = bytes(b for b in range(256) if b not in b"[]{}")
_NESTING_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")
_HEX_INT = re.compile(r"-?[0-9a-f]+")
_FLAT = frozenset({str, int, float, bool, type(None), bytes, complex})  # hashable, compared in linear time


def _nested_deeper(structure: bytes, delete: bytes, steps: bytes, limit: int) -> bool:
    """Whether the brackets left by ``delete`` nest deeper than ``limit`` (+1 / -1 per byte)."""
    brackets = structure.translate(steps, delete)
    if b"\x01" * (limit + 1) in brackets:  # the usual deep frame, found by one search
        return True
    return max(itertools.accumulate(memoryview(brackets).cast("b")), default=0) > limit


def _check_structure(data: bytes, max_depth: int, max_items: int) -> None:
    """Refuse a frame on its bytes outside strings, before anything is parsed.

    Every ``"`` starts or ends a string (``\\"`` and ``\\\\`` are refused) and strings hold
    no raw ``" [ ] { } , :`` (encode writes ``\\uXXXX``), so deleting every other byte and
    then each ``""`` leaves exactly the structure; a quote left over means a string held
    one of them. What json will parse is then bounded by counting bytes.
    """
    if b'\\"' in data or b"\\\\" in data:
        raise WireError('a string holds \\" or \\\\ (encode writes \\uXXXX)')
    structure = data.translate(None, _KEEP_STRUCTURE).replace(b'""', b"")
    if b'"' in structure:
        raise WireError("a string holds a raw structural character (encode writes \\uXXXX)")
    objects = structure.count(b"{")
    # every "{" starts a known key with nothing between (a raw "{" is never inside a string),
    # and one ":" per object means no object has a second key (json memoizes keys in a dict)
    if structure.count(b":") != objects or (objects and _NOT_A_TAG.search(data)):
        raise WireError("a JSON object that is not one known tag")
    arrays = structure.count(b"[")
    if 1 + structure.count(b",") + arrays > max_items:
        raise WireError(f"frame holds more than {max_items} values")
    if arrays > max_depth and _nested_deeper(structure, _ARRAYS_ONLY, _ARRAY_STEPS, max_depth):
        raise WireError(f"frame nested deeper than {max_depth}")
    # a container is an array inside at most one object, a tagged scalar one more object
    limit = 2 * max_depth + 1
    if arrays + objects > limit and _nested_deeper(structure, _NESTING_ONLY, _NESTING_STEPS, limit):
        raise WireError(f"frame nested deeper than {max_depth}")


def _holds_frozenset(x: Any) -> bool:
    stack = [x]
    while stack:
        y = stack.pop()
        t = type(y)
        if t is frozenset:
            return True
        if t is tuple:
            stack.extend(y)
    return False


def _check_hashes(elems: list, what: str) -> None:
    """Refuse elements that would make building a set or dict superlinear (or fail)."""
    if len(elems) <= MAX_EQUAL_HASHES and _FLAT.issuperset(map(type, elems)):
        return  # at most MAX_EQUAL_HASHES**2 / 2 comparisons of scalars
    try:
        hashes = list(map(hash, elems))
    except TypeError:
        raise WireError(f"a {what} is unhashable") from None
    if len(set(hashes)) == len(hashes):
        return
    counts = collections.Counter(hashes)
    worst = max(counts.values())
    if worst > MAX_EQUAL_HASHES:
        raise WireError(f"{worst} {what}s share one hash (at most {MAX_EQUAL_HASHES})")
    shared = {h for h, n in counts.items() if n > 1}
    for h, e in zip(hashes, elems, strict=True):
        if h in shared and _holds_frozenset(e):
            raise WireError(f"a {what} holding a frozenset shares its hash with another")


def _items(v: Any, what: str) -> list:
    if type(v) is not list:
        raise WireError(f"a {what} is encoded as an array, not {type(v).__name__}")
    return v


def _build_tuple(v: Any) -> tuple:
    return tuple(_items(v, "tuple"))


def _build_unique(v: Any, name: str, make: type) -> Any:
    """A set or frozenset: no adversarially equal hashes, no repeated elements."""
    elems = _items(v, name)
    _check_hashes(elems, f"{name} element")
    out = make(elems)
    if len(out) != len(elems):
        raise WireError(f"a {name} with repeated elements")
    return out


def _build_set(v: Any) -> set:
    return _build_unique(v, "set", set)


def _build_frozenset(v: Any) -> frozenset:
    return _build_unique(v, "frozenset", frozenset)


def _build_dict(v: Any) -> dict:
    flat = _items(v, "dict")
    if len(flat) & 1:
        raise WireError("a dict key without a value")
    keys = flat[0::2]
    if len(keys) > MAX_EQUAL_HASHES or not _FLAT.issuperset(map(type, keys)):
        _check_hashes(keys, "dict key")
    out = dict(zip(keys, flat[1::2], strict=True))
    if len(out) != len(keys):
        raise WireError("a dict with repeated keys")
    return out


def _text(v: Any, what: str) -> str:
    if type(v) is not str:
        raise WireError(f"{what} is encoded as a string, not {type(v).__name__}")
    return v


def _build_bytes(v: Any) -> bytes:
    try:
        return binascii.a2b_base64(_text(v, "bytes"), strict_mode=True)
    except (binascii.Error, ValueError):
        raise WireError("bytes that are not base64") from None


def _build_surrogates(v: Any) -> str:
    try:
        return binascii.a2b_base64(_text(v, "a str with surrogates"), strict_mode=True).decode("utf-8", "surrogatepass")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise WireError("a str with surrogates that is not base64 of UTF-8") from None


def _build_int(v: Any) -> int:
    if not _HEX_INT.fullmatch(_text(v, "a big int")):
        raise WireError("a big int that is not lowercase hex digits")
    return int(v, 16)


def _build_complex(v: Any) -> complex:
    parts = _text(v, "a complex").split(" ")
    try:
        if len(parts) == 2:
            return complex(float(parts[0]), float(parts[1]))
    except ValueError:
        pass
    raise WireError("a complex that is not two floats")


_BUILDERS: dict[str, Callable[[Any], Any]] = {
    "t": _build_tuple,
    "s": _build_set,
    "f": _build_frozenset,
    "d": _build_dict,
    "b": _build_bytes,
    "i": _build_int,
    "c": _build_complex,
    "u": _build_surrogates,
}
_NOT_A_TAG = re.compile(b'{(?!"[%s]":)' % "".join(_BUILDERS).encode())


def _tagged(pairs: list[tuple[str, Any]]) -> Any:
    """json's object hook: ``_check_structure`` made every object one known key."""
    ((tag, v),) = pairs
    if tag == "t" and type(v) is list:  # the most common tag, inline
        return tuple(v)
    return _BUILDERS[tag](v)


def _bounded_int(text: str) -> int:
    if len(text) - text.startswith("-") > _INT_DIGITS:
        raise WireError(f"a decimal int longer than {_INT_DIGITS} digits")
    return int(text)


# parse_constant=float: a new float per NaN, so a set keeps every NaN
_DECODER = json.JSONDecoder(object_pairs_hook=_tagged, parse_constant=float)
# for a parent that lifted the int digit limit (long decimal ints parse in quadratic time)
_BOUNDED_DECODER = json.JSONDecoder(object_pairs_hook=_tagged, parse_constant=float, parse_int=_bounded_int)


def decode(
    data: bytes,
    *,
    max_bytes: int = MAX_FRAME_BYTES,
    max_depth: int = MAX_DEPTH,
    max_items: int = MAX_ITEMS,
) -> Any:
    """The value of a frame body written by :func:`encode`, or by a hostile writer.

    Linear in ``len(data)``; the result holds no shared references. Raises :class:`WireError`,
    and nothing else, for a frame that is too long, too deep, holds too many values, is not
    a valid encoding, or holds a set or dict whose elements collide in hash (module docstring).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireError(f"a frame is bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise WireError(f"frame of {len(data)} bytes exceeds {max_bytes}")
    _check_structure(data, max_depth, max_items)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise WireError("frame is not ASCII") from None
    limit = sys.get_int_max_str_digits()
    decoder = _DECODER if 0 < limit <= _INT_DIGITS_DEFAULT else _BOUNDED_DECODER
    try:
        return decoder.decode(text)
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:  # RecursionError: a parent already deep in its stack
        raise WireError(f"not a valid frame: {str(exc)[:200]}") from None
