"""Processes that own runs: ``host:pid:start`` keys, one liveness check, and the ``dvc`` process
a stage runs under (Linux ``/proc``; elsewhere a pid check without start times)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

__all__ = ["pid_alive", "process_alive", "process_key", "repro_owner"]


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not; one of another user does)."""
    fields = _stat(pid)
    if fields is not None:
        return fields[0] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not sys.platform.startswith("linux")  # on Linux a live pid has a /proc entry


def process_key(pid: int) -> str | None:
    """``host:pid:start`` for a live process (start = clock ticks since boot, Linux)."""
    fields = _stat(pid)
    if fields is not None and len(fields) > 19:
        start = fields[19]
    else:
        if sys.platform.startswith("linux") or not pid_alive(pid):
            return None
        start = "?"
    return f"{socket.gethostname()}:{pid}:{start}"


def process_alive(key: str) -> bool:
    """Whether the owner named by ``key`` may still run (other hosts: assumed alive)."""
    try:
        host, pid_s, start = key.rsplit(":", 2)
        pid = int(pid_s)
    except ValueError:
        return True
    if host != socket.gethostname():
        return True
    now = process_key(pid)
    return now is not None and (start == "?" or now == key)


def _ppid(pid: int) -> int | None:
    fields = _stat(pid)
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


def repro_owner() -> tuple[str, str]:
    """(owner key, kind) of the pipeline run this process belongs to when no parent run is given.

    Under ``dvc repro`` (``$DVC_STAGE`` set) the owner is the ``dvc`` process: the first ancestor
    without ``$DVC_STAGE`` (kind ``dvc-repro``); otherwise this process itself (kind ``manual``).
    """
    if "DVC_STAGE" in os.environ:
        pid = os.getppid()
        for _ in range(16):  # the first ancestor without $DVC_STAGE is the dvc process
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                break
            if b"\0DVC_STAGE=" not in b"\0" + env:
                key = process_key(pid)
                if key:
                    return key, "dvc-repro"
                break
            nxt = _ppid(pid)
            if not nxt or nxt <= 1:
                break
            pid = nxt
        key = process_key(os.getppid())
        if key:
            return key, "dvc-repro"
    return process_key(os.getpid()) or f"{socket.gethostname()}:{os.getpid()}:?", "manual"
