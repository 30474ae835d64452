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
                                   share one hash; and the comparisons per value that
                                   colliding elements holding frozensets may cost
====================  ===========  =====================================================

:func:`decode` is linear in ``len(data)``. Before parsing, C-level byte operations check
that every string is free of raw structural bytes, that every JSON object is exactly one
known key, the nesting depth and the number of values. ``json`` (C) then parses; each
tagged object is built by a hook as soon as its contents are (children first, no
recursion of our own). Before a set, frozenset or dict is built the hashes of its
elements are compared: int, float, complex and tuple hashes are easy to make collide (str
hashes too where ``PYTHONHASHSEED`` is fixed), and ``n`` equal hashes cost ``n**2 / 2``
equality checks, so at most ``MAX_EQUAL_HASHES`` may be equal. Frozensets whose values'
hashes coincide share a hash (``frozenset({0, None})`` and ``frozenset({"", None})``);
comparing two looks each value of one up among the other's values of its hash, so
elements holding frozensets may share a hash while that costs at most
``MAX_EQUAL_HASHES`` comparisons per value they hold, and none of them holds a frozenset
of frozensets (whose comparisons multiply with each level of nesting). Every violation
raises :class:`WireError` (a ``ValueError``).

The format checks the *encoding*, not the *shape*: ``{"status": "ok", "value": 1}`` decodes
fine, and whether it is a valid result frame is the caller's question. Decoded values may
also hold what no canonical value holds (frozensets, nan, a 10**6-element set), within the
limits above.

>>> decode(encode({"value": (1, 2.5, {3}), "dirty": None}))
{'value': (1, 2.5, {3}), 'dirty': None}
"""

from __future__ import annotations

from codethinker.sandbox.protocol.base import MAX_DEPTH, MAX_EQUAL_HASHES, MAX_FRAME_BYTES, MAX_ITEMS, WireError
from codethinker.sandbox.protocol.decoding import decode
from codethinker.sandbox.protocol.encoding import encode

__all__ = ["MAX_DEPTH", "MAX_EQUAL_HASHES", "MAX_FRAME_BYTES", "MAX_ITEMS", "WireError", "decode", "encode"]
