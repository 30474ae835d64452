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
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ARCHES", "ArchTable", "build_program", "install", "native_arch", "supported", "why_unsupported"]

# ----------------------------------------------------------------------------- kernel constants
AUDIT_ARCH_X86_64 = 0xC000003E  # EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
AUDIT_ARCH_AARCH64 = 0xC00000B7  # EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
X32_SYSCALL_BIT = 0x40000000

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
RET_EPERM = SECCOMP_RET_ERRNO | errno.EPERM
RET_ENOSYS = SECCOMP_RET_ERRNO | errno.ENOSYS

# classic BPF opcodes (linux/bpf_common.h)
BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JMP_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JMP_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
BPF_JMP_JSET_K = 0x05 | 0x40 | 0x00  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
SOCK_FILTER = struct.Struct("=HBBI")  # struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}
BPF_MAXINSNS = 4096

# struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6];}
OFF_NR = 0
OFF_ARCH = 4
OFF_ARGS = 16

CLONE_NEW_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
CLONE_NS_MASK = sum(CLONE_NEW_FLAGS.values())
PERSONALITY_ALLOWED = (0, 0xFFFFFFFF)  # PER_LINUX; the query "what is my personality"

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1

# ----------------------------------------------------------------------------- syscall tables
# name: (x86_64 number, aarch64 number); None where the architecture has no such call.
DENIED: dict[str, tuple[int | None, int | None]] = {
    # running another program: a new image would hold the sample's open fds (its result pipe
    # among them) without any of the Python-level guards (the tracer's audit hook)
    "execve": (59, 221),
    "execveat": (322, 281),
    # SysV / POSIX IPC
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    "semget": (64, 190),
    "semop": (65, 193),
    "semctl": (66, 191),
    "semtimedop": (220, 192),
    "msgget": (68, 186),
    "msgsnd": (69, 189),
    "msgrcv": (70, 188),
    "msgctl": (71, 187),
    "mq_open": (240, 180),
    "mq_unlink": (241, 181),
    # sockets
    "socket": (41, 198),
    "socketpair": (53, 199),
    # namespaces
    "unshare": (272, 97),
    "setns": (308, 268),
    # mounts
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "open_tree_attr": (467, 467),
    # other processes' memory
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    # kernel subsystems
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    # machine administration
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "lookup_dcookie": (212, 18),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "syslog": (103, 116),
    "vhangup": (153, 58),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "adjtimex": (159, 171),
    "clock_adjtime": (305, 266),
    "iopl": (172, None),
    "ioperm": (173, None),
    "modify_ldt": (154, None),
    "uselib": (134, None),
}
# calls the filter decides on by argument or answers with another errno
SPECIAL: dict[str, tuple[int, int]] = {
    "clone": (56, 220),
    "clone3": (435, 435),
    "personality": (135, 92),
    "seccomp": (317, 277),
}


@dataclass(frozen=True)
class ArchTable:
    """The numbers the filter needs for one architecture."""

    name: str
    audit_arch: int
    deny: Mapping[str, int]
    clone: int
    clone3: int
    personality: int
    seccomp: int
    x32: bool  # deny every call with X32_SYSCALL_BIT (x86_64 only)


def _table(name: str, column: int, audit_arch: int, x32: bool) -> ArchTable:
    deny = {call: nrs[column] for call, nrs in DENIED.items() if nrs[column] is not None}
    special = {call: nrs[column] for call, nrs in SPECIAL.items()}
    return ArchTable(
        name=name,
        audit_arch=audit_arch,
        deny=deny,
        clone=special["clone"],
        clone3=special["clone3"],
        personality=special["personality"],
        seccomp=special["seccomp"],
        x32=x32,
    )


ARCHES: dict[str, ArchTable] = {
    "x86_64": _table("x86_64", 0, AUDIT_ARCH_X86_64, x32=True),
    "aarch64": _table("aarch64", 1, AUDIT_ARCH_AARCH64, x32=False),
}
_MACHINE_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


# ----------------------------------------------------------------------------- BPF assembly
@dataclass(frozen=True)
class _Insn:
    """One instruction; ``jt``/``jf`` are label names (resolved later) or 0 for "next"."""

    code: int
    k: int
    jt: str | int = 0
    jf: str | int = 0


def _ld(offset: int) -> _Insn:
    return _Insn(BPF_LD_W_ABS, offset)


def _ret(action: int) -> _Insn:
    return _Insn(BPF_RET_K, action)


def _arg_low(i: int) -> int:
    """Offset of the low 32-bit word of ``args[i]`` (little-endian only; checked by the caller)."""
    return OFF_ARGS + 8 * i


def _assemble(body: list[_Insn | str]) -> bytes:
    """Resolve labels (strings in ``body`` mark positions) into forward jump offsets."""
    labels: dict[str, int] = {}
    insns: list[_Insn] = []
    for item in body:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)

    def offset(target: str | int, at: int) -> int:
        if isinstance(target, int):
            return target
        delta = labels[target] - at - 1
        if not 0 <= delta <= 255:
            raise ValueError(f"BPF jump to {target!r} out of range ({delta})")
        return delta

    if len(insns) > BPF_MAXINSNS:
        raise ValueError(f"BPF program too long ({len(insns)} instructions)")
    return b"".join(
        SOCK_FILTER.pack(ins.code, offset(ins.jt, i), offset(ins.jf, i), ins.k) for i, ins in enumerate(insns)
    )


def build_program(table: ArchTable) -> bytes:
    """The filter for ``table`` as packed ``struct sock_filter`` records (native byte order)."""
    body: list[_Insn | str] = [
        _ld(OFF_ARCH),
        _Insn(BPF_JMP_JEQ_K, table.audit_arch, jt=0, jf="deny"),
        _ld(OFF_NR),
    ]
    if table.x32:
        body.append(_Insn(BPF_JMP_JGE_K, X32_SYSCALL_BIT, jt="deny", jf=0))
    body += [_Insn(BPF_JMP_JEQ_K, nr, jt="deny") for nr in sorted(set(table.deny.values()))]
    body += [
        _Insn(BPF_JMP_JEQ_K, table.clone, jt="clone"),
        _Insn(BPF_JMP_JEQ_K, table.clone3, jt="enosys"),
        _Insn(BPF_JMP_JEQ_K, table.personality, jt="personality"),
        _ret(SECCOMP_RET_ALLOW),
        "clone",
        _ld(_arg_low(0)),
        _Insn(BPF_JMP_JSET_K, CLONE_NS_MASK, jt="deny", jf="allow"),
        "personality",
        _ld(_arg_low(0)),
        _Insn(BPF_JMP_JEQ_K, PERSONALITY_ALLOWED[0], jt="allow"),
        _Insn(BPF_JMP_JEQ_K, PERSONALITY_ALLOWED[1], jt="allow", jf="deny"),
        "allow",
        _ret(SECCOMP_RET_ALLOW),
        "deny",
        _ret(RET_EPERM),
        "enosys",
        _ret(RET_ENOSYS),
    ]
    return _assemble(body)


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
