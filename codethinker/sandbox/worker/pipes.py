"""The sample's ends of its two pipes: one job request in (a pickle from the trusted parent), one
result frame out (the bounded wire format of :mod:`codethinker.sandbox.protocol`, never pickle).
Both framed by an 8-byte little-endian length (``HEADER``).

:func:`make_sender` binds everything a result frame needs (a private encoder from
:func:`~codethinker.sandbox.protocol.encoding.make_encoder`, ``os.write``, the header) into a closure
that the worker makes before the sample's code runs and keeps in its own frame: what the sample does
to this module, to the protocol modules, to ``os`` or to the builtins does not reach it.
"""

from __future__ import annotations

import os
import pickle
import struct
from collections.abc import Callable
from typing import Any

from codethinker.sandbox import protocol
from codethinker.sandbox.protocol.encoding import make_encoder

__all__ = ["HEADER", "MAX_MESSAGE", "make_sender", "read_exact", "recv_request", "send"]

HEADER = struct.Struct("<Q")
MAX_MESSAGE = 256 * 1024 * 1024  # a request larger than this is refused


def read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def recv_request(fd: int) -> dict | None:
    """One job frame from the (trusted) parent; None on EOF or an oversized frame."""
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    data = read_exact(fd, n) if n <= MAX_MESSAGE else None
    return None if data is None else pickle.loads(data)


def make_sender(fd: int) -> Callable[[Any], None]:
    """``send(obj)``: encode ``obj`` and write it as one frame to ``fd``, with nothing looked up at
    call time (a private encoder, the ``os.write`` and builtins of this moment)."""
    encode, write, pack, view_of, len_ = make_encoder(), os.write, HEADER.pack, memoryview, len

    def send_frame(obj: Any) -> None:
        data = encode(obj)
        view = view_of(pack(len_(data)) + data)
        while view:
            view = view[write(fd, view) :]

    return send_frame


def send(fd: int, obj: Any) -> None:
    """Encode and write one frame to the parent: the bounded wire format of
    :mod:`codethinker.sandbox.protocol`, never pickle, so the parent's decoding is linear and builds
    at most O(frame) objects whatever the sample returns (the ready frame; results go through
    :func:`make_sender`)."""
    data = protocol.encode(obj)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
