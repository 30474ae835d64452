"""Encoding a value as a frame of the wire format (the child's side; the format is described in
:mod:`codethinker.sandbox.protocol`).

:func:`make_encoder` builds a private encoder: its functions are closures over everything they use
(helpers, constants, builtins), so none of them reads a module global or a builtin at call time, and
the objects they use are reachable only through the returned function. A sandbox worker makes one
before the sample's code runs and keeps it where the sample cannot reach it (its own frame): a sample
that replaces ``encode`` in this module, one of its helpers, or a builtin (``len``, ``type``) changes
nothing in what the worker writes. :func:`encode` is an encoder made at import, for everyone else.
"""

from __future__ import annotations

import binascii
import itertools
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

from codethinker.sandbox.protocol.base import MAX_DEPTH, MAX_FRAME_BYTES, MAX_ITEMS, WireError

__all__ = ["encode", "make_encoder"]

_SMALL_INT = 1 << 64  # ints with abs() below this are JSON numbers, larger ones hex strings
_OPEN = {tuple: '{"t":[', set: '{"s":[', frozenset: '{"f":[', dict: '{"d":['}
_NON_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
_STRUCTURAL_ESCAPES = tuple((c, f"\\u{ord(c):04x}") for c in "[]{},:")


def make_encoder() -> Callable[..., bytes]:
    """A new ``encode(obj, *, max_bytes=MAX_FRAME_BYTES, max_depth=MAX_DEPTH, max_items=MAX_ITEMS)``
    (see :func:`encode`) whose helpers and builtins are all bound here."""
    _type, _len, _int_repr, _float_repr = type, len, int.__repr__, float.__repr__
    _list, _tuple, _set, _frozenset, _dict, _str, _int, _float, _bool, _bytes, _complex = (
        list, tuple, set, frozenset, dict, str, int, float, bool, bytes, complex,
    )  # fmt: skip
    _chain, _b2a, _quote = itertools.chain.from_iterable, binascii.b2a_base64, encode_basestring_ascii
    _wire_error, _recursion_error, _unicode_error = WireError, RecursionError, UnicodeEncodeError
    small, opens, non_finite, escapes = _SMALL_INT, dict(_OPEN), dict(_NON_FINITE), _STRUCTURAL_ESCAPES
    containers = _frozenset({_list, _tuple, _set, _frozenset, _dict})

    def str_text(x: str) -> str:
        """``x`` as an ASCII JSON string with none of ``" \\ [ ] { } , :`` between its quotes except
        as ``\\uXXXX`` (for a str without surrogates)."""
        text = _quote(x)
        if '"' in x or "\\" in x or "[" in x or "]" in x or "{" in x or "}" in x or "," in x or ":" in x:
            body = text[1:-1].replace("\\\\", "\\u005c").replace('\\"', "\\u0022")
            for c, esc in escapes:
                body = body.replace(c, esc)
            text = f'"{body}"'
        return text

    def b64(data: bytes) -> str:
        return _b2a(data, newline=False).decode("ascii")

    def no_room(what: str, room: int) -> WireError:
        return _wire_error(f"encoded value exceeds max_bytes: {what} needs more than the {room} bytes left")

    def scalar_text(x: Any, t: type, room: int) -> str:
        """The text of a value that is not a container; ``room``: bytes left for it."""
        if t is _str:
            if _len(x) + 2 > room:  # before escaping: the text is at least this long
                raise no_room(f"a str of {_len(x)} chars", room)
            if x.isascii():
                return str_text(x)
            try:
                x.encode("utf-8")
            except _unicode_error:  # surrogates: JSON would join an escaped high and low one
                data = x.encode("utf-8", "surrogatepass")
            else:
                return str_text(x)
            if _len(data) * 4 // 3 > room:
                raise no_room(f"a str of {_len(x)} chars", room)
            return f'{{"u":"{b64(data)}"}}'
        if t is _int:
            if -small < x < small:
                return _int_repr(x)
            if x.bit_length() // 4 > room:
                raise no_room(f"an int of {x.bit_length()} bits", room)
            return f'{{"i":"{x:x}"}}'
        if t is _float:
            r = _float_repr(x)
            return non_finite.get(r, r)
        if x is None:
            return "null"
        if t is _bool:
            return "true" if x else "false"
        if t is _bytes:
            if _len(x) * 4 // 3 > room:
                raise no_room(f"bytes of length {_len(x)}", room)
            return f'{{"b":"{b64(x)}"}}'
        if t is _complex:
            return f'{{"c":"{_float_repr(x.real)} {_float_repr(x.imag)}"}}'
        raise _wire_error(f"{t.__name__} is not plain data")

    def put(x: Any, out: list[str], size: int, depth: int, limits: tuple[int, int, int]) -> int:
        """Append the text of a container ``x`` to ``out``; return the size written so far. ``out[0]``
        counts the values as the decoder does (1 + commas + arrays). Refuses as soon as one of
        ``limits = (max_bytes, max_depth, max_items)`` is passed (the recursion is capped by max_depth)."""
        max_bytes, max_depth, max_items = limits
        if depth >= max_depth:
            raise _wire_error(f"value nested deeper than {max_depth}")
        depth += 1
        t = _type(x)
        out.append("[" if t is _list else opens[t])
        size += 1 if t is _list else 7  # the brackets, less the comma the closing one replaces
        items = _chain(x.items()) if t is _dict else x
        n = 0
        for item in items:
            n += 1
            ti = _type(item)
            if ti is _int and -small < item < small:  # the most common items, inline
                text = _int_repr(item)
            elif ti is _str and item.isascii() and _len(item) + 2 <= max_bytes - size:
                text = f'"{item}"' if item.isidentifier() else str_text(item)
            elif ti in containers:
                size = put(item, out, size, depth, limits)
                text = ""
            else:
                text = scalar_text(item, ti, max_bytes - size)
            if text:
                size += _len(text)
                out.append(text)
            size += 1
            if size > max_bytes:
                raise _wire_error(f"encoded value exceeds max_bytes ({max_bytes} bytes)")
            out.append(",")
        counted = out[0] + 1 + (n - 1 if n else 0)  # its "[" and the commas between its items
        if counted > max_items:
            raise _wire_error(f"value holds more than {max_items} values (the decoder's limit)")
        out[0] = counted
        if out[-1] == ",":
            out[-1] = "]" if t is _list else "]}"
        else:
            out.append("]" if t is _list else "]}")
        return size

    def encode(
        obj: Any, *, max_bytes: int = MAX_FRAME_BYTES, max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS
    ) -> bytes:
        out: list[Any] = [1]  # out[0]: the values counted so far; the text follows
        t = _type(obj)
        try:
            if t in containers:
                put(obj, out, 0, 0, (max_bytes, max_depth, max_items))
            else:
                out.append(scalar_text(obj, t, max_bytes))
        except _recursion_error:
            raise _wire_error("value nested too deeply for the interpreter's recursion limit") from None
        if out[0] > max_items:
            raise _wire_error(f"value holds more than {max_items} values (the decoder's limit)")
        out[0] = ""
        data = "".join(out).encode("ascii")
        if _len(data) > max_bytes:  # the running size is exact but for one byte per empty container
            raise _wire_error(f"encoded value exceeds max_bytes ({max_bytes} bytes)")
        return data

    return encode


encode = make_encoder()
encode.__doc__ = """The frame body for ``obj`` (plain data only, see :mod:`codethinker.sandbox.protocol`).

Raises :class:`WireError` for anything else, past ``max_bytes`` (checked while encoding, so a value
that repeats one large object costs at most ``max_bytes``), past ``max_depth`` nested containers (so
a value that contains itself is refused too), and past ``max_items`` values counted as the decoder
counts them (one per value and one more per empty container): whatever :func:`encode` writes within
the default limits, :func:`~codethinker.sandbox.protocol.decode` accepts."""
