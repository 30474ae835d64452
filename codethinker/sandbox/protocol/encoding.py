"""Encoding a value as a frame of the wire format (the child's side; the format is described in
:mod:`codethinker.sandbox.protocol`)."""

from __future__ import annotations

import binascii
import itertools
from json.encoder import encode_basestring_ascii
from typing import Any

from codethinker.sandbox.protocol.base import MAX_DEPTH, MAX_FRAME_BYTES, WireError

__all__ = ["encode"]

_SMALL_INT = 1 << 64  # ints with abs() below this are JSON numbers, larger ones hex strings
_OPEN = {tuple: '{"t":[', set: '{"s":[', frozenset: '{"f":[', dict: '{"d":['}
_NON_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
_STRUCTURAL_ESCAPES = tuple((c, f"\\u{ord(c):04x}") for c in "[]{},:")


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
