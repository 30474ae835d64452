"""Output capture, the per-sample timer and safe error text for the sandbox's sample process.

Not public API; runs INSIDE the sandbox (imported by :mod:`codethinker.sandbox.worker.sample`).
``sys.stdout``/``sys.stderr`` of a sample are :class:`Capped` buffers that keep ``limit``
characters; the timer is ``ITIMER_REAL`` whose handler raises :class:`SandboxTimeout` while a
sample runs (:data:`ACTIVE`); :func:`safe_text` and :func:`type_name` turn a hostile exception
into plain text without trusting its ``__str__`` result or its class's ``__name__``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ACTIVE", "Capped", "SandboxTimeout", "no_input", "on_alarm", "safe_text", "type_name"]

MAX_ERROR_CHARS = 2000


class Capped:
    """A text stream that keeps the first ``limit`` characters and drops the rest."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def write(self, s: str) -> int:
        if type(s) is not str:
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        room = self.limit - self.size
        if room > 0:
            part = s[:room]
            self.parts.append(part)
            self.size += len(part)
        self.dropped += max(0, n - max(room, 0))
        return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("captured stream has no file descriptor")

    def getvalue(self) -> str:
        text = "".join(self.parts)
        data = text.encode("utf-8", "replace")
        if len(data) > self.limit:
            text = data[: self.limit].decode("utf-8", "ignore")
        if self.dropped:
            text += f"\n[... {self.dropped} characters dropped]"
        return text


class SandboxTimeout(BaseException):
    """Raised inside the sample by the per-sample timer (a BaseException so ``except Exception``
    in user code does not swallow it)."""


ACTIVE = [False]  # the timer raises only while this is set (user code is running)


def on_alarm(signum: int, frame: Any) -> None:
    """SIGALRM handler: interrupt the sample (re-armed every 50 ms if it swallows it)."""
    if ACTIVE[0]:
        raise SandboxTimeout("time limit exceeded")


def no_input(*args: Any) -> str:
    """``input()`` of a sample: there is no stdin."""
    raise EOFError("input() is not available in the sandbox")


def safe_text(obj: Any, limit: int = MAX_ERROR_CHARS) -> str:
    """``str(obj)`` as an exact ``str`` of at most ``limit`` characters (may run user code)."""
    try:
        s = str(obj)
        if type(s) is not str:
            s = str.__str__(s)
        return s[:limit]
    except BaseException:
        return "<unprintable>"


def type_name(exc: BaseException) -> str:
    """The class name of ``exc``, read past any metaclass property."""
    name = type.__dict__["__name__"].__get__(type(exc))
    return name if type(name) is str else "<unknown>"
