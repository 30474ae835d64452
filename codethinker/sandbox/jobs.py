"""What goes into a sandbox and what comes out: :class:`Job`, :class:`SandboxResult`, and the
parent's checks on a result frame (the sample's process may be compromised)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from codethinker.sandbox import protocol

__all__ = ["STATUSES", "Job", "SandboxResult", "Status", "loads_plain", "opt_str", "result_from_frame"]

Status = Literal["ok", "timeout", "error", "memory", "killed"]
STATUSES = frozenset({"ok", "timeout", "error", "memory", "killed"})
MAX_RESULT_BYTES = protocol.MAX_FRAME_BYTES  # 8 MiB: a larger frame kills the sample's process


@dataclass(frozen=True)
class Job:
    """One sample: define ``entry`` by running ``source``, then run ``runner`` on it.

    ``entry_def``: the runner gets ``entry`` only if it is the very function that the source's last
    top-level ``def entry`` made (the code object compiled from ``source``, with the module's globals),
    not a decorator's or a later assignment's replacement; otherwise the job is ``error``/``EntryReplaced``.
    """

    source: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    entry: str = "f"
    runner: str = "call"
    options: dict = field(default_factory=dict)
    entry_def: bool = False


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one :class:`Job`; ``value`` is plain builtin data (``status == "ok"``)."""

    status: Status
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def loads_plain(data: bytes) -> Any:
    """Decode a (possibly hostile) result frame: linear in its size, plain data only, bounded in
    depth, item count and hash collisions (:mod:`codethinker.sandbox.protocol`); raises WireError."""
    return protocol.decode(data, max_bytes=MAX_RESULT_BYTES)


def opt_str(x: Any, limit: int = 10_000) -> str | None:
    return x[:limit] if type(x) is str else None


def result_from_frame(msg: Any, output_limit: int) -> SandboxResult:
    """Validate a worker's result frame (the worker may be compromised)."""
    if type(msg) is not dict or msg.get("status") not in STATUSES:
        return SandboxResult("killed", error_type="ProtocolError", error_message="malformed result frame")
    duration = msg.get("duration_s")
    cap = output_limit + 100
    return SandboxResult(
        status=msg["status"],
        value=msg.get("value") if msg["status"] == "ok" else None,
        error_type=opt_str(msg.get("error_type"), 200),
        error_message=opt_str(msg.get("error_message")),
        stdout=opt_str(msg.get("stdout"), cap) or "",
        stderr=opt_str(msg.get("stderr"), cap) or "",
        duration_s=float(duration) if type(duration) is float else 0.0,
    )
