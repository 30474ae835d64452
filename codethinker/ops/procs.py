"""Processes by ``host:pid:start`` key and whether they still run (Linux ``/proc``; elsewhere a pid
check without start times).

A run records the key of the process that opened it (tag ``codethinker.owner``) so that a run left
``RUNNING`` by a killed process can be told from a live one (:func:`codethinker.ops.runs.reap`);
the flow keys its own bookkeeping the same way. Which run is whose parent is never looked up here:
it is passed explicitly (``$CODETHINKER_PARENT_RUN_ID``, :mod:`codethinker.ops.runs`)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

__all__ = ["pid_alive", "process_alive", "process_key"]


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
