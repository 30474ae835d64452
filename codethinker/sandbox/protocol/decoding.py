"""Decoding a frame of the wire format (the parent's side: the frame may be hostile; the format
and its limits are described in :mod:`codethinker.sandbox.protocol`)."""

from __future__ import annotations

import binascii
import collections
import itertools
import json
import re
import sys
from collections.abc import Callable
from typing import Any

from codethinker.sandbox.protocol.base import MAX_DEPTH, MAX_EQUAL_HASHES, MAX_FRAME_BYTES, MAX_ITEMS, WireError

__all__ = ["decode"]

_INT_DIGITS = 20  # the longest decimal int a frame holds (2**64 - 1 has 20 digits)
_INT_DIGITS_DEFAULT = 4300  # sys.get_int_max_str_digits() of a default interpreter
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


def _frozenset_counts(x: Any, what: str) -> tuple[int, int, int]:
    """Of an element holding frozensets (through tuples): its values, those inside its frozensets, and
    the most values of one of its frozensets that share a hash; refused where a frozenset holds one."""
    values = inside = bucket = 0
    stack = [(x, False)]
    while stack:
        y, held = stack.pop()
        values, inside = values + 1, inside + held
        t = type(y)
        if t is tuple:
            stack.extend((z, held) for z in y)
        elif t is frozenset:
            if held:
                raise WireError(f"a {what} holding a frozenset of frozensets shares its hash with another")
            bucket = max(bucket, *collections.Counter(map(hash, y)).values(), 1)
            stack.extend((z, True) for z in y)
    return values, inside, bucket


def _check_frozenset_work(groups: list[tuple[int, list]], what: str) -> None:
    """Refuse elements holding frozensets whose hashes coincide when comparing them would cost more than
    ``MAX_EQUAL_HASHES`` per value they hold (what scalars of one hash may cost).

    Comparing two frozensets of one hash looks each value of one up in the other: a hash, then one
    comparison with each of the other's values of that hash (at most ``bucket`` of them). So an
    element among ``k`` of one hash costs at most ``k - 1`` times ``values + bucket * inside``; a
    frozenset of frozensets would multiply that with each level, and is refused.
    """
    work = held = 0
    for k, group in groups:
        counts = [_frozenset_counts(e, what) for e in group]
        bucket = max(c[2] for c in counts)
        work += (k - 1) * sum(values + bucket * inside for values, inside, _ in counts)
        held += sum(c[0] for c in counts)
    if work > MAX_EQUAL_HASHES * held:
        raise WireError(f"{what}s holding frozensets share hashes: {work} comparisons for {held} values")


def _check_hashes(elems: list, what: str) -> None:
    """Refuse elements that would make building a set or dict superlinear (or fail): more than
    ``MAX_EQUAL_HASHES`` of one hash, or elements holding frozensets whose comparisons would cost
    more (:func:`_check_frozenset_work`)."""
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
    groups = collections.defaultdict(list)  # elements holding a frozenset, by the hash they share
    for h, e in zip(hashes, elems, strict=True):
        if counts[h] > 1 and _holds_frozenset(e):
            groups[h].append(e)
    if groups:
        _check_frozenset_work([(counts[h], group) for h, group in groups.items()], what)


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
