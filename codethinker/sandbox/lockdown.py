"""Lock-down of a sample's process, in the child the zygote just forked (runs INSIDE the sandbox).

Not public API. What every sample shares is set once in the zygote before it forks
(:func:`zygote_limits`: ``RLIMIT_CORE=0``, ``RLIMIT_NOFILE``, ``RLIMIT_FSIZE``, ``RLIMIT_AS``,
``PR_SET_NO_NEW_PRIVS``; fds 0 and 1 on ``/dev/null``); :func:`lock_down` then runs in each
forked child before any user code, in this order: enter the sample's private dir; a private
SysV IPC / POSIX mqueue namespace when there is no seccomp filter to refuse IPC;
``RLIMIT_NPROC``; the drop from root to the lane's unprivileged uid; ``PR_SET_PDEATHSIG``
(after the uid change, which clears it); ``PR_SET_DUMPABLE=0``; fd 2 onto ``/dev/null``.
Doing the shared part once saves a few hundred microseconds per sample (every page the child
writes after the fork is copied).

The seccomp filter of :mod:`codethinker.sandbox.seccomp` (when that module is present and the kernel
supports it, :func:`seccomp_status`) is installed once in the zygote, before it forks any
sample: a filter is inherited by every child and can never be removed, so each sample runs
under it from its first instruction, without paying the ~0.5 ms that loading it costs per
process. The zygote's own work (fork, kill, wait, rename, mkdir, chown) is allowed by it.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from types import ModuleType
from typing import Any

__all__ = ["lock_down", "prctl", "seccomp_status", "vm_size_bytes", "zygote_limits"]

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWIPC = 0x08000000

_LIBC = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> None:
    """``prctl(option, arg, 0, 0, 0)``; raises ``OSError`` when it fails."""
    if _LIBC.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def seccomp_status() -> tuple[ModuleType | None, str]:
    """The seccomp module when it can be used here, and a word on why (not) for the parent."""
    try:
        from codethinker.sandbox import seccomp  # written separately; optional
    except ImportError:
        return None, "missing"
    try:
        if not seccomp.supported():
            return None, "unsupported"
    except Exception as exc:
        return None, f"probe failed: {type(exc).__name__}"
    return seccomp, "on"


def vm_size_bytes() -> int:
    """This process's address-space size (``VmSize``), bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _set_limit(which: int, value: int) -> None:
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _private_ipc() -> None:
    """A SysV IPC / POSIX mqueue namespace of this process alone (needs CAP_SYS_ADMIN: root in
    the bwrap sandbox; elsewhere it is skipped)."""
    if os.geteuid() == 0:
        _LIBC.unshare(CLONE_NEWIPC)  # failure leaves the slot's namespace: documented


def zygote_limits(cfg: dict[str, Any]) -> None:
    """Limits set once in the zygote, inherited by every sample it forks: ``RLIMIT_CORE=0``,
    ``RLIMIT_NOFILE``, ``RLIMIT_FSIZE``, ``RLIMIT_AS`` (the zygote's size + ``memory_mb``),
    ``PR_SET_NO_NEW_PRIVS`` and ``PR_SET_DUMPABLE=0``. ``RLIMIT_NPROC`` is set by each sample (a non-root zygote of
    isolation "none" must still fork)."""
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_NOFILE, cfg["nofile"])
    _set_limit(resource.RLIMIT_FSIZE, cfg["fsize"])
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # exec of a setuid binary cannot give root back
    prctl(PR_SET_DUMPABLE, 0)  # where samples share the zygote's uid (non-root): no ptrace or /proc/<pid>/mem of it
    mem = cfg["memory_mb"]
    if mem:
        _set_limit(resource.RLIMIT_AS, vm_size_bytes() + mem * 1024 * 1024)


def lock_down(cfg: dict[str, Any], workdir: str, uid: int | None) -> None:
    """Make the freshly forked child a sample process (see the module docstring)."""
    os.chdir(workdir)
    os.environ["HOME"] = os.environ["TMPDIR"] = workdir
    if cfg["ipc_private"]:
        _private_ipc()
    _set_limit(resource.RLIMIT_NPROC, cfg["nproc"])
    if uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError("could not drop root")
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid (a uid change clears it)
    if os.getppid() != cfg["zygote_pid"]:
        os._exit(3)
    prctl(PR_SET_DUMPABLE, 0)  # no ptrace, no /proc/<pid>/mem, fd or environ for anyone else
    os.dup2(0, 2)  # the zygote's fds 0 and 1 are /dev/null already; 2 was its error log
