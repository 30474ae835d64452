"""A seccomp-BPF deny filter for the sandbox's sample process (ctypes only, no libseccomp).

``install()`` puts a classic-BPF program on the calling process (``PR_SET_NO_NEW_PRIVS`` first,
then ``seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC)``, or
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` on kernels without the ``seccomp`` call).
``supported()`` says, without touching the caller, whether that can work here (it installs the
filter once in a forked child and checks that a denied call really fails; the answer is cached).

Why a filter at all: the bubblewrap namespaces isolate the network, pids, IPC and hostname of
a sandbox, but the kernel surface reachable from inside stays that of any unprivileged process:
a sample could create user namespaces and mount file systems in them, talk to host Unix
sockets whose files are visible through the read-only bind of ``/``, share SysV IPC objects
with later samples of the same sandbox, or reach rarely used, bug-prone subsystems
(io_uring, bpf, perf, userfaultfd, keyrings). None of that is needed to run a Python function.

What is denied, with ``EPERM`` (Python reports ``PermissionError``; no call kills the process):

* **Running another program**: ``execve execveat``. A new image would keep the sample's open
  descriptors (its result pipe among them) without any of the Python-level guards, such as the
  tracer's audit hook; no sample needs it (``RLIMIT_NPROC`` already stops ``fork``).
* **Foreign ABIs.** A call whose ``seccomp_data.arch`` is not the native one (i386 ``int 0x80``
  on x86_64, arm32 compat on aarch64) is refused whatever its number; on x86_64 every x32 call
  (``nr & 0x40000000``) is refused too, so no second syscall table can go around the list.
* **SysV and POSIX IPC**: ``shmget shmat shmctl shmdt semget semop semctl semtimedop msgget
  msgsnd msgrcv msgctl mq_open mq_unlink``. IPC objects outlive the process that made them and
  are shared by every process of the IPC namespace (all samples of one sandbox).
* **Sockets of every family**: ``socket socketpair``. This closes host Unix sockets reached by
  path (the network namespace does not cover file sockets), abstract sockets and every
  network family at the source.
* **Namespaces**: ``unshare setns``, and ``clone`` whose flags (low 32 bits of arg0, which is
  the flags word on both x86_64 and aarch64) carry any ``CLONE_NEW*`` bit (NEWNS, NEWCGROUP,
  NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET; ``CLONE_NEWTIME`` is not a clone flag: that bit is
  part of the exit signal there). Plain ``fork`` and thread clones pass the filter (the
  sandbox's ``RLIMIT_NPROC`` stops them). ``clone3`` takes its flags in memory, which a filter
  cannot read, so it gets ``ENOSYS``: glibc (2.34+) then falls back to ``clone``, which is
  checked; code that calls ``clone3`` with no fallback cannot make processes or threads.
* **Mounts**: ``mount umount2 pivot_root chroot move_mount open_tree open_tree_attr fsopen
  fsmount fsconfig fspick mount_setattr``.
* **Other processes' memory**: ``ptrace process_vm_readv process_vm_writev kcmp``.
* **Large or privileged kernel subsystems**: ``bpf perf_event_open userfaultfd io_uring_setup
  io_uring_enter io_uring_register keyctl add_key request_key`` (the user keyring is shared by
  every process of a uid, across samples).
* **Machine administration and file handles** (most fail for an unprivileged uid anyway;
  denied so that a root caller or a capability leak cannot use them either): ``init_module finit_module delete_module
  kexec_load kexec_file_load reboot swapon swapoff acct quotactl quotactl_fd lookup_dcookie
  name_to_handle_at open_by_handle_at syslog vhangup settimeofday clock_settime adjtimex
  clock_adjtime`` and, on x86_64, ``iopl ioperm modify_ldt uselib``.
* ``personality``, except the query ``0xffffffff`` and the default ``PER_LINUX`` (0): other
  values turn off address-space randomisation or make readable memory executable.

Beyond the list this module was asked for: ``mq_unlink`` (the other end of ``mq_open``),
``mount_setattr``, ``open_tree_attr`` (kernel 6.15+) and ``quotactl_fd`` (newer forms of listed
calls), ``modify_ldt`` and ``uselib`` (x86-only legacy surface Python never uses).

Beyond that list, added with the tracer's guard: ``execve execveat`` (above).

Everything else is allowed: imports, files, ``mmap``, signals and timers, ``fork``/threads
(limited elsewhere), ``os.getpid`` and so on; Python runs normally under it.

Limits — what the filter does **not** do:

* It is a deny list, not an allow list: a system call added by a later kernel is allowed until
  it is added to the tables below, and every allowed call (file systems, ``futex``, ``mmap``,
  ``ioctl`` on the fds a sample can open, ...) remains kernel attack surface.
* Descriptors that already exist keep working: it stops the *creation* of sockets and IPC
  objects, so the process must not inherit a socket it should not use (the sandbox child gets
  pipes only).
* It does not limit reading files (world-readable host files stay readable),
  ``memfd_create``, ``pidfd_*``, ``prctl``, ``seccomp`` itself (filters stack: a second filter
  can only deny more), ``inotify``/``fanotify``, ``ioctl`` requests, CPU or memory use.
* Cost: ``install()`` takes ~0.2-0.7 ms in a freshly forked child here (the ``seccomp`` call
  itself 0.14-0.22 ms, the rest first-touch work after the fork); every call then takes ~0.1 µs more (``getppid``
  0.27-0.32 → 0.39-0.45 µs; ``stat`` unchanged within noise at ~2.6 µs). On kernels older than
  5.16 booted with the default ``spec_store_bypass_disable=seccomp``, a filter also turns on
  the speculative-store-bypass mitigation for the process, which slows some code down; the
  filter keeps the kernel's choice (no ``SECCOMP_FILTER_FLAG_SPEC_ALLOW``).
* ``PR_SET_NO_NEW_PRIVS`` stays set if loading the filter then fails.
* Architectures: x86_64 and aarch64, 64-bit little-endian processes. Elsewhere ``install()``
  raises ``OSError`` and ``supported()`` is false.
* Numbers are those of the kernel's ``arch/x86/entry/syscalls/syscall_64.tbl`` and of
  ``include/uapi/asm-generic/unistd.h`` (aarch64); the tests compare them with the installed
  kernel headers when present.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import select
import struct
import sys
import warnings

from codethinker.sandbox.seccomp_bpf import ARCHES, SOCK_FILTER, ArchTable, build_program

__all__ = ["ARCHES", "ArchTable", "build_program", "install", "native_arch", "supported", "why_unsupported"]

# ----------------------------------------------------------------------------- prctl / seccomp()
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1

_MACHINE_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


# ----------------------------------------------------------------------------- installing
def native_arch() -> ArchTable:
    """The table of the running process's ABI; ``OSError`` when it is not one the filter knows."""
    machine = os.uname().machine
    name = _MACHINE_ALIASES.get(machine)
    if name is None:
        raise OSError(errno.ENOTSUP, f"seccomp filter: unsupported architecture {machine!r} (x86_64, aarch64 only)")
    if struct.calcsize("P") != 8 or sys.byteorder != "little":
        raise OSError(errno.ENOTSUP, f"seccomp filter: needs a 64-bit little-endian process on {machine}")
    return ARCHES[name]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long
_LIBC.prctl.restype = ctypes.c_int


def _prctl(option: int, arg2: int, arg3: ctypes.c_void_p | None = None) -> int:
    """``prctl`` with every unused argument a full-width zero (the kernel checks them)."""
    ctypes.set_errno(0)
    third = arg3 if arg3 is not None else ctypes.c_ulong(0)
    return _LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), third, ctypes.c_ulong(0), ctypes.c_ulong(0))


def _load(program: bytes, table: ArchTable) -> None:
    """Hand ``program`` to the kernel (TSYNC: every thread of the process gets the filter)."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // SOCK_FILTER.size, ctypes.cast(buf, ctypes.c_void_p))
    ctypes.set_errno(0)
    r = _LIBC.syscall(
        ctypes.c_long(table.seccomp),
        ctypes.c_ulong(SECCOMP_SET_MODE_FILTER),
        ctypes.c_ulong(SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(prog),
    )
    if r == 0:
        return
    if r > 0:  # TSYNC names the thread that could not take the filter
        raise OSError(errno.EAGAIN, f"seccomp filter: thread {r} could not be synchronised")
    err = ctypes.get_errno()
    if err != errno.ENOSYS:
        raise OSError(err, f"seccomp(SECCOMP_SET_MODE_FILTER) refused: {os.strerror(err)}")
    if _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.cast(ctypes.pointer(prog), ctypes.c_void_p)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER) refused: {os.strerror(err)}")


@functools.cache
def _program(name: str) -> bytes:
    """``build_program`` of one architecture, built once per process (forked children inherit it)."""
    return build_program(ARCHES[name])


def install() -> None:
    """Install the filter in the calling process; ``OSError`` naming the reason if impossible."""
    table = native_arch()
    program = _program(table.name)
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS) refused: {os.strerror(err)}")
    _load(program, table)


# ----------------------------------------------------------------------------- probing
_PROBE_TIMEOUT_S = 10.0
_probe_result: str | None = None  # "" when supported, else the reason; None before the probe


def _probe_child(w: int) -> None:
    """In the forked child: install, then check that a denied call is refused; never returns."""
    msg = b""
    try:
        install()
        ctypes.set_errno(0)
        fd = _LIBC.socket(ctypes.c_int(1), ctypes.c_int(1), ctypes.c_int(0))  # AF_UNIX, SOCK_STREAM
        err = ctypes.get_errno()
        if fd >= 0 or err != errno.EPERM:
            msg = f"filter installed but socket() gave {fd} ({os.strerror(err)})".encode()
        else:
            msg = b"ok"
    except BaseException as exc:  # report anything: the parent decides
        msg = f"{type(exc).__name__}: {exc}".encode(errors="replace")
    finally:
        try:
            os.write(w, msg[:4000])
        finally:
            os._exit(0)


def _probe() -> str:
    """Fork a child that installs the filter; "" when it worked there, else the reason."""
    try:
        _program(native_arch().name)  # built here once, so that forked children only load it
    except OSError as exc:
        return str(exc)
    if not hasattr(os, "fork"):
        return "seccomp filter: no fork() here"
    r, w = os.pipe()
    try:
        with warnings.catch_warnings():  # 3.12+ warns about fork with threads; the child only makes syscalls
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(r)
            _probe_child(w)
        os.close(w)
        w = -1
        return _collect(r, pid)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def _collect(r: int, pid: int) -> str:
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([r], [], [], _PROBE_TIMEOUT_S)
            if not ready:
                os.kill(pid, 9)
                return "seccomp filter: probe child did not answer"
            data = os.read(r, 4096)
            if not data:
                break
            chunks.append(data)
    finally:
        os.waitpid(pid, 0)
    answer = b"".join(chunks).decode(errors="replace")
    return "" if answer == "ok" else answer or "seccomp filter: probe child died"


def why_unsupported() -> str | None:
    """None when ``install()`` works here, else why not (probed once per process, cached)."""
    global _probe_result
    if _probe_result is None:
        _probe_result = _probe()
    return _probe_result or None


def supported() -> bool:
    """Whether ``install()`` can work in this process (nothing is installed in the caller)."""
    return why_unsupported() is None
