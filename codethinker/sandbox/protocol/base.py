"""Limits and the error of the wire format (:mod:`codethinker.sandbox.protocol`)."""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "MAX_EQUAL_HASHES", "MAX_FRAME_BYTES", "MAX_ITEMS", "VALUE_MAX_DEPTH", "WireError"]

# The deepest value a runner returns: ``codethinker.contra.values.MAX_DEPTH`` (the sandbox does
# not import contra; tests/test_wire.py checks that the two agree).
VALUE_MAX_DEPTH = 100

MAX_FRAME_BYTES = 8 * 1024 * 1024
MAX_DEPTH = VALUE_MAX_DEPTH + 16
MAX_ITEMS = 1 << 21
MAX_EQUAL_HASHES = 32


class WireError(ValueError):
    """A value that cannot be encoded, or a frame that is not a valid, bounded encoding."""
