"""The sample's ends of its two pipes: one job request in (a pickle from the trusted parent), one
result frame out (the bounded wire format of :mod:`codethinker.sandbox.protocol`, never pickle).
Both framed by an 8-byte little-endian length (``HEADER``)."""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

from codethinker.sandbox import protocol

__all__ = ["HEADER", "MAX_MESSAGE", "read_exact", "recv_request", "send"]

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


def send(fd: int, obj: Any) -> None:
    """Encode and write one frame to the parent (the single place frames are encoded): the
    bounded wire format of :mod:`codethinker.sandbox.protocol`, never pickle, so the parent's decoding is
    linear and builds at most O(frame) objects whatever the sample returns."""
    data = protocol.encode(obj)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
