"""The seccomp filter (``codethinker.sandbox.seccomp``): its BPF program, decoded and emulated for every
listed call on both architectures; its numbers against the installed kernel headers; and, in
forked children that install it, the live kernel's answers: IPC, sockets (host Unix files and
abstract names included), namespaces, mounts and the rest refused with EPERM, ``clone3`` with
ENOSYS, ordinary Python still working, stacking, and the ``tests/hostile/s_*.py`` programs.

Nothing here installs a filter in the pytest process itself; every test that runs a denied call
also checks that no SysV object and no mount was left on the host (and removes any it finds).
"""

from __future__ import annotations

import ast
import ctypes
import errno
import os
import pickle
import re
import select
import socket
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codethinker.sandbox import seccomp as sc
from codethinker.sandbox import seccomp_bpf as bpf

from ._hostile import HOSTILE, header

S_FILES = sorted(HOSTILE.glob("s_*.py"))
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
NATIVE = sc.ARCHES.get(sc._MACHINE_ALIASES.get(os.uname().machine, ""))

# What the brief asked the filter to refuse with EPERM (names; per-arch absence allowed for x86-only calls).
REQUIRED = (
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "semget",
    "semop",
    "semctl",
    "semtimedop",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "socket",
    "socketpair",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "lookup_dcookie",
    "name_to_handle_at",
    "open_by_handle_at",
    "syslog",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
)
X86_ONLY = {"iopl", "ioperm", "modify_ldt", "uselib"}

AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_ARM = 0x40000028


# ----------------------------------------------------------------------------- a classic-BPF emulator
def _decode(program: bytes) -> list[tuple[int, int, int, int]]:
    size = bpf.SOCK_FILTER.size
    assert len(program) % size == 0
    return [bpf.SOCK_FILTER.unpack_from(program, i) for i in range(0, len(program), size)]


def _seccomp_data(nr: int, arch: int, args: tuple[int, ...] = ()) -> bytes:
    full = (tuple(args) + (0,) * 6)[:6]
    return struct.pack("<iIQ6Q", nr, arch, 0, *full)


def run_filter(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """The action the filter returns for one call (only the opcodes a seccomp filter of ours uses)."""
    insns = _decode(program)
    data = _seccomp_data(nr, arch, args)
    acc = 0
    pc = 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == bpf.BPF_LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (bpf.BPF_JMP_JEQ_K, bpf.BPF_JMP_JGE_K, bpf.BPF_JMP_JSET_K):
            cond = {bpf.BPF_JMP_JEQ_K: acc == k, bpf.BPF_JMP_JGE_K: acc >= k, bpf.BPF_JMP_JSET_K: bool(acc & k)}[code]
            pc += 1 + (jt if cond else jf)
        elif code == bpf.BPF_RET_K:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x} at {pc}")


# ----------------------------------------------------------------------------- pure checks
def test_deny_list_covers_what_was_asked():
    missing = set(REQUIRED) - set(bpf.DENIED)
    assert not missing
    for arch in sc.ARCHES.values():
        assert set(arch.deny) | X86_ONLY >= set(bpf.DENIED), arch.name
    assert {"iopl", "ioperm"} <= set(sc.ARCHES["x86_64"].deny)
    for table in sc.ARCHES.values():
        numbers = [*table.deny.values(), table.clone, table.clone3, table.personality, table.seccomp]
        assert len(numbers) == len(set(numbers)), f"{table.name}: two names share a number"


@pytest.mark.parametrize("arch", sorted(sc.ARCHES))
def test_every_denied_number_jumps_to_the_eperm_return(arch: str):
    """Read the program itself: after loading nr, each listed number has a JEQ whose true branch
    lands on ``RET ERRNO|EPERM``; clone3's lands on ``RET ERRNO|ENOSYS``."""
    table = sc.ARCHES[arch]
    insns = _decode(sc.build_program(table))
    assert insns[0] == (bpf.BPF_LD_W_ABS, 0, 0, bpf.OFF_ARCH)
    assert insns[1][0] == bpf.BPF_JMP_JEQ_K and insns[1][3] == table.audit_arch
    assert insns[2] == (bpf.BPF_LD_W_ABS, 0, 0, bpf.OFF_NR)

    def target(pc: int) -> tuple[int, int, int, int]:
        return insns[pc + 1 + insns[pc][1]]

    jeq_targets: dict[int, tuple[int, int, int, int]] = {}
    pc = 3
    while insns[pc][0] in (bpf.BPF_JMP_JEQ_K, bpf.BPF_JMP_JGE_K):
        if insns[pc][0] == bpf.BPF_JMP_JEQ_K:
            assert insns[pc][2] == 0, "a false branch must fall through to the next comparison"
            jeq_targets[insns[pc][3]] = target(pc)
        else:
            assert (
                table.x32 and insns[pc][3] == bpf.X32_SYSCALL_BIT and target(pc) == (bpf.BPF_RET_K, 0, 0, bpf.RET_EPERM)
            )
        pc += 1
    assert insns[pc] == (bpf.BPF_RET_K, 0, 0, bpf.SECCOMP_RET_ALLOW), "anything unlisted is allowed"
    for name, nr in table.deny.items():
        assert jeq_targets.get(nr) == (bpf.BPF_RET_K, 0, 0, bpf.RET_EPERM), name
    assert jeq_targets[table.clone3] == (bpf.BPF_RET_K, 0, 0, bpf.RET_ENOSYS)
    assert jeq_targets[table.clone][0] == bpf.BPF_LD_W_ABS  # decided by its flags
    assert jeq_targets[table.personality][0] == bpf.BPF_LD_W_ABS  # decided by its argument
    assert table.seccomp not in jeq_targets  # a second filter can be stacked


@pytest.mark.parametrize("arch", sorted(sc.ARCHES))
def test_emulated_filter_over_every_number(arch: str):
    table = sc.ARCHES[arch]
    prog = sc.build_program(table)
    denied = set(table.deny.values())
    for nr in range(1200):
        got = run_filter(prog, nr, table.audit_arch)
        if nr in denied:
            want = bpf.RET_EPERM
        elif nr == table.clone3:
            want = bpf.RET_ENOSYS
        else:  # clone(0) and personality(0) are allowed too
            want = bpf.SECCOMP_RET_ALLOW
        assert got == want, (arch, nr, hex(got))
    for foreign in (AUDIT_ARCH_I386, AUDIT_ARCH_ARM, bpf.AUDIT_ARCH_X86_64 ^ bpf.AUDIT_ARCH_AARCH64 ^ table.audit_arch):
        for nr in (0, 1, 39, 172, table.seccomp):
            assert run_filter(prog, nr, foreign) == bpf.RET_EPERM, (arch, hex(foreign), nr)
    x32 = [run_filter(prog, bpf.X32_SYSCALL_BIT | nr, table.audit_arch) for nr in (0, 39, 41, 56)]
    assert x32 == [bpf.RET_EPERM if table.x32 else bpf.SECCOMP_RET_ALLOW] * 4
    assert run_filter(prog, -1, table.audit_arch) == (bpf.RET_EPERM if table.x32 else bpf.SECCOMP_RET_ALLOW)


@pytest.mark.parametrize("arch", sorted(sc.ARCHES))
def test_emulated_clone_and_personality_arguments(arch: str):
    table = sc.ARCHES[arch]
    prog = sc.build_program(table)
    sigchld = 17
    fork_flags = 0x01000000 | 0x00200000 | sigchld  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID (glibc fork)
    thread_flags = 0x3D0F00  # glibc pthread_create
    for flags in (0, sigchld, fork_flags, thread_flags, 0xFFFFFFFF_00000000 | fork_flags):
        assert run_filter(prog, table.clone, table.audit_arch, (flags,)) == bpf.SECCOMP_RET_ALLOW, hex(flags)
    for name, bit in bpf.CLONE_NEW_FLAGS.items():
        for flags in (bit, bit | fork_flags, bit | thread_flags):
            assert run_filter(prog, table.clone, table.audit_arch, (flags,)) == bpf.RET_EPERM, name
        # only arg0 carries the flags
        assert run_filter(prog, table.clone, table.audit_arch, (sigchld, bit, bit, bit, bit)) == bpf.SECCOMP_RET_ALLOW
    for persona in (0, 0xFFFFFFFF):
        assert run_filter(prog, table.personality, table.audit_arch, (persona,)) == bpf.SECCOMP_RET_ALLOW
    for persona in (0x0040000, 0x0400000, 0x0008, 1):  # ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, PER_BSD, PER_SVR4..
        assert run_filter(prog, table.personality, table.audit_arch, (persona,)) == bpf.RET_EPERM, hex(persona)


def _header_numbers(path: Path, prefix: str) -> dict[str, int]:
    out = {}
    for m in re.finditer(rf"^#define __NR{prefix}_(\w+)\s+(\d+)\s*$", path.read_text(), re.M):
        out[m.group(1)] = int(m.group(2))
    return out


HEADERS = {  # arch: (candidate paths, name prefix after __NR)
    "x86_64": (("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"), ""),
    "aarch64": (("/usr/include/asm-generic/unistd.h",), "(?:3264)?"),
}


@pytest.mark.parametrize("arch", sorted(HEADERS))
def test_numbers_match_the_kernel_headers(arch: str):
    candidates, prefix = HEADERS[arch]
    path = next((Path(c) for c in candidates if Path(c).exists()), None)
    if path is None:
        pytest.skip(f"none of {candidates} here (apt-get install linux-libc-dev)")
    known = _header_numbers(path, prefix)
    table = sc.ARCHES[arch]
    names = {**table.deny, "clone": table.clone, "clone3": table.clone3}
    names |= {"personality": table.personality, "seccomp": table.seccomp}
    checked = 0
    for name, nr in names.items():
        if name in known:
            assert known[name] == nr, (arch, name, known[name], nr)
            checked += 1
    newer = {"open_tree_attr", "quotactl_fd", "mount_setattr"}  # may postdate the installed headers
    assert set(names) - set(known) <= newer, set(names) - set(known) - newer
    assert checked >= len(names) - len(newer)


def _defines(header: str) -> dict[str, int]:
    path = Path("/usr/include") / header
    if not path.exists():
        pytest.skip(f"{path} is absent (apt-get install linux-libc-dev)")
    found = re.findall(r"^#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)U?L?\b", path.read_text(), re.M)
    return {name: int(val, 0) for name, val in found}


def test_constants_match_the_kernel_headers():
    sched, seccomp, prctl = _defines("linux/sched.h"), _defines("linux/seccomp.h"), _defines("linux/prctl.h")
    audit, em = _defines("linux/audit.h"), _defines("linux/elf-em.h")
    assert {name: sched[name] for name in bpf.CLONE_NEW_FLAGS} == bpf.CLONE_NEW_FLAGS
    assert (seccomp["SECCOMP_RET_ALLOW"], seccomp["SECCOMP_RET_ERRNO"]) == (
        bpf.SECCOMP_RET_ALLOW,
        bpf.SECCOMP_RET_ERRNO,
    )
    assert (seccomp["SECCOMP_MODE_FILTER"], seccomp["SECCOMP_SET_MODE_FILTER"]) == (2, sc.SECCOMP_SET_MODE_FILTER)
    assert (prctl["PR_SET_NO_NEW_PRIVS"], prctl["PR_SET_SECCOMP"]) == (sc.PR_SET_NO_NEW_PRIVS, sc.PR_SET_SECCOMP)
    flags64 = audit["__AUDIT_ARCH_64BIT"] | audit["__AUDIT_ARCH_LE"]
    assert em["EM_X86_64"] | flags64 == bpf.AUDIT_ARCH_X86_64
    assert em["EM_AARCH64"] | flags64 == bpf.AUDIT_ARCH_AARCH64
    assert (em["EM_386"] | audit["__AUDIT_ARCH_LE"], em["EM_ARM"] | audit["__AUDIT_ARCH_LE"]) == (
        AUDIT_ARCH_I386,
        AUDIT_ARCH_ARM,
    )


def test_assembler_refuses_jumps_it_cannot_encode():
    table = sc.ARCHES["x86_64"]
    big = sc.ArchTable(
        name="big",
        audit_arch=table.audit_arch,
        deny={f"n{i}": 1000 + i for i in range(300)},
        clone=table.clone,
        clone3=table.clone3,
        personality=table.personality,
        seccomp=table.seccomp,
        x32=True,
    )
    with pytest.raises(ValueError, match="out of range"):
        sc.build_program(big)


def test_unknown_architecture_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch):
    real = os.uname()
    fake = os.uname_result((real.sysname, real.nodename, real.release, real.version, "riscv64"))
    monkeypatch.setattr(os, "uname", lambda: fake)
    with pytest.raises(OSError, match="unsupported architecture 'riscv64'"):
        sc.install()
    assert "riscv64" in sc._probe()
    assert _seccomp_status()["Seccomp"] == "0"  # nothing was installed here


def test_probe_reports_why_install_failed_in_its_child(monkeypatch: pytest.MonkeyPatch):
    if NATIVE is None:
        pytest.skip("not x86_64/aarch64")

    def refuse() -> None:
        raise OSError(errno.EINVAL, "kernel said no")

    monkeypatch.setattr(sc, "install", refuse)  # the forked child inherits the patch
    assert sc._probe() == "OSError: [Errno 22] kernel said no"


def test_support_is_probed_once_per_process(monkeypatch: pytest.MonkeyPatch):
    calls = []
    monkeypatch.setattr(sc, "_probe_result", None)
    monkeypatch.setattr(sc, "_probe", lambda: calls.append(1) or "no luck")
    assert (sc.supported(), sc.supported(), sc.why_unsupported()) == (False, False, "no luck")
    assert calls == [1]


# ----------------------------------------------------------------------------- live: helpers
def _seccomp_status(pid: str = "self") -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Seccomp"):
            key, _, val = line.partition(":")
            out[key] = val.strip()
    return out


def in_child(fn: Callable[[], Any], installs: int = 1, timeout: float = 60.0) -> Any:
    """Fork; the child installs the filter ``installs`` times, runs ``fn`` and pickles the result back."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # never return into pytest from here
        try:
            os.close(r)
            try:
                for _ in range(installs):
                    sc.install()
                out: tuple = ("ok", fn())
            except BaseException as exc:
                out = ("raised", type(exc).__name__, str(exc))
            os.write(w, pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([r], [], [], timeout)
            if not ready:
                os.kill(pid, 9)
                raise AssertionError("child timed out")
            data = os.read(r, 65536)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    out = pickle.loads(b"".join(chunks))
    assert out[0] == "ok", out
    return out[1]


def errno_of(nr: int, *args: int) -> int:
    """Raw system call with integer arguments; 0 on success, else errno."""
    ctypes.set_errno(0)
    r = LIBC.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    return 0 if r >= 0 else ctypes.get_errno()


def _sysv_ids() -> set[tuple[str, int]]:
    ids = set()
    for kind in ("shm", "sem", "msg"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        ids |= {(kind, int(line.split()[1])) for line in lines if line.strip()}
    return ids


def _remove_sysv(kind: str, ident: int) -> None:
    ipc_rmid = 0
    if kind == "shm":
        LIBC.shmctl(ident, ipc_rmid, None)
    elif kind == "sem":
        LIBC.semctl(ident, 0, ipc_rmid)
    else:
        LIBC.msgctl(ident, ipc_rmid, None)


def _mounts() -> set[str]:
    return {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}


@pytest.fixture(autouse=True)
def host_unchanged() -> Iterator[None]:
    """No SysV object and no mount may appear on the host; leftovers are removed, then reported."""
    ipc, mounts = _sysv_ids(), _mounts()
    yield
    new_ipc, new_mounts = _sysv_ids() - ipc, _mounts() - mounts
    for kind, ident in new_ipc:
        _remove_sysv(kind, ident)
    for target in new_mounts:
        LIBC.umount2(target.encode(), 2)  # MNT_DETACH
    assert not new_ipc and not new_mounts, (new_ipc, new_mounts)


# Skip the live tests only where the kernel or the architecture rules the filter out; a filter that
# installs but does not deny (a bug here) must fail them, not skip them.
_WHY = sc.why_unsupported()
live = pytest.mark.skipif(
    _WHY is not None and "installed but" not in _WHY, reason=f"seccomp filter unavailable: {_WHY}"
)


@pytest.fixture
def unix_server(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A listening Unix socket file on the host, mode 0777, that accepts without blocking."""
    path = str(tmp_path / "host.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(8)
    srv.setblocking(False)
    yield srv, path
    srv.close()


def _accepted(srv: socket.socket) -> int:
    n = 0
    while True:
        try:
            conn, _ = srv.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


# ----------------------------------------------------------------------------- live: the kernel's answers
def test_supported_wherever_the_kernel_has_seccomp():
    if NATIVE is None or "Seccomp_filters" not in _seccomp_status():
        pytest.skip("not x86_64/aarch64, or a kernel without seccomp filters")
    assert sc.supported(), sc.why_unsupported()


@live
def test_supported_probe_leaves_the_caller_untouched():
    assert sc.supported() is True and sc.why_unsupported() is None
    assert _seccomp_status()["Seccomp"] == "0"
    socket.socket().close()  # still allowed here


@live
def test_sysv_ipc_is_refused():
    def attempt() -> dict[str, int]:
        out = {}
        for name, call in (
            ("shmget", lambda: LIBC.shmget(0, ctypes.c_size_t(4096), 0o1600)),  # IPC_PRIVATE, IPC_CREAT | 0600
            ("semget", lambda: LIBC.semget(0, 1, 0o1600)),
            ("msgget", lambda: LIBC.msgget(0, 0o1600)),
        ):
            ctypes.set_errno(0)
            out[name] = 0 if call() >= 0 else ctypes.get_errno()
        return out

    assert in_child(attempt) == {"shmget": errno.EPERM, "semget": errno.EPERM, "msgget": errno.EPERM}


@live
def test_sockets_of_every_family_are_refused():
    def attempt() -> list[str]:
        out = []
        tries: list[Callable[[], object]] = [
            lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM),
            lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),
            lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
            lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
            lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM),
            lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW),
            lambda: socket.socketpair(),
            lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM),
        ]
        for fn in tries:
            try:
                fn()
                out.append("created")
            except OSError as exc:
                out.append(type(exc).__name__)
        return out

    assert in_child(attempt) == ["PermissionError"] * 8


@live
def test_host_unix_socket_file_and_abstract_name_are_unreachable(unix_server):
    srv, path = unix_server
    abstract = b"\0codethinker-seccomp-test-" + str(os.getpid()).encode()
    asrv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    asrv.bind(abstract)
    asrv.listen(8)
    asrv.setblocking(False)
    try:
        # control: both are reachable without the filter
        for addr, server in ((path, srv), (abstract, asrv)):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.connect(addr)
            assert _accepted(server) == 1

        def attempt() -> list[str]:
            out = []
            for addr in (path, abstract):
                try:
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                        c.connect(addr)
                        c.sendall(b"pwned")
                    out.append("connected")
                except OSError as exc:
                    out.append(errno.errorcode[exc.errno])
            return out

        assert in_child(attempt) == ["EPERM", "EPERM"]
        assert _accepted(srv) == 0 and _accepted(asrv) == 0
    finally:
        asrv.close()


@live
def test_namespaces_are_refused():
    def attempt() -> dict[str, int]:
        out = {}
        for name, flag in bpf.CLONE_NEW_FLAGS.items():
            ctypes.set_errno(0)
            out[f"unshare {name}"] = 0 if LIBC.unshare(flag) == 0 else ctypes.get_errno()
        fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        out["setns own net"] = errno_of(NATIVE.deny["setns"], fd, 0)
        os.close(fd)
        sigchld = 17
        for name in ("CLONE_NEWUSER", "CLONE_NEWNET", "CLONE_NEWNS"):
            ctypes.set_errno(0)
            r = LIBC.syscall(
                ctypes.c_long(NATIVE.clone), ctypes.c_long(bpf.CLONE_NEW_FLAGS[name] | sigchld), *[ctypes.c_long(0)] * 4
            )
            if r == 0:  # a child made despite the filter: leave at once
                os._exit(0)
            if r > 0:
                os.waitpid(r, 0)
            out[f"clone {name}"] = 0 if r >= 0 else ctypes.get_errno()
        return out

    got = in_child(attempt)
    assert got == dict.fromkeys(got, errno.EPERM)
    assert len(got) == len(bpf.CLONE_NEW_FLAGS) + 4
    if hasattr(os, "unshare"):  # Python 3.12+
        assert in_child(lambda: _raises(lambda: os.unshare(os.CLONE_NEWUSER))) == "PermissionError"


def _raises(fn: Callable[[], object]) -> str:
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__
    return "no error"


@live
def test_mounts_are_refused(tmp_path: Path):
    target = tmp_path / "mnt"
    target.mkdir()
    t = str(target).encode()

    def attempt() -> dict[str, int]:
        out = {}
        ctypes.set_errno(0)
        out["mount"] = 0 if LIBC.mount(b"none", t, b"tmpfs", ctypes.c_ulong(0), None) == 0 else ctypes.get_errno()
        ctypes.set_errno(0)
        out["umount2"] = 0 if LIBC.umount2(t, 2) == 0 else ctypes.get_errno()
        ctypes.set_errno(0)
        out["chroot"] = 0 if LIBC.chroot(t) == 0 else ctypes.get_errno()
        out["pivot_root"] = errno_of(NATIVE.deny["pivot_root"], 0, 0)
        out["fsopen"] = errno_of(NATIVE.deny["fsopen"], 0, 0)
        out["open_tree"] = errno_of(NATIVE.deny["open_tree"], -100, 0, 0)
        return out

    got = in_child(attempt)
    assert got == dict.fromkeys(got, errno.EPERM)


@live
def test_clone3_gets_enosys_and_x32_is_refused():
    control = errno_of(NATIVE.clone3, 0, 0)  # no filter: the kernel rejects size 0 with EINVAL
    assert control == errno.EINVAL

    def attempt() -> tuple[int, int]:
        x32 = errno_of(bpf.X32_SYSCALL_BIT | 39) if NATIVE.x32 else errno.EPERM  # x32 getpid
        return errno_of(NATIVE.clone3, 0, 0), x32

    assert in_child(attempt) == (errno.ENOSYS, errno.EPERM)


# calls whose bad-argument form could still change the machine if the filter let them through
UNSAFE_TO_CALL = {
    "vhangup", "acct", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "settimeofday",
    "clock_settime", "adjtimex", "clock_adjtime", "init_module", "finit_module", "delete_module", "syslog",
    "iopl", "ioperm", "modify_ldt", "uselib", "personality",
}  # fmt: skip


@live
def test_every_listed_call_is_refused_by_the_kernel():
    """Every entry of the native table, called with invalid arguments (-1), gives EPERM: the
    filter answers before the kernel looks at them. Calls that could act even on such arguments
    are covered by the emulator only."""
    calls = {name: nr for name, nr in NATIVE.deny.items() if name not in UNSAFE_TO_CALL}
    got = in_child(lambda: {name: errno_of(nr, *[-1] * 6) for name, nr in calls.items()})
    assert got == dict.fromkeys(calls, errno.EPERM)
    assert len(calls) >= 45


@live
def test_personality_query_allowed_change_refused():
    def attempt() -> tuple[int, int, int]:
        query = LIBC.personality(ctypes.c_ulong(0xFFFFFFFF))
        ctypes.set_errno(0)
        change = LIBC.personality(ctypes.c_ulong(0x0040000))  # ADDR_NO_RANDOMIZE
        return query, change, ctypes.get_errno()

    query, change, err = in_child(attempt)
    assert query >= 0 and change == -1 and err == errno.EPERM


@live
def test_ordinary_python_still_works(tmp_path: Path):
    def work() -> dict[str, object]:
        import collections
        import decimal
        import fractions
        import hashlib
        import itertools
        import json
        import math
        import mmap
        import random
        import signal
        import statistics
        import subprocess
        import tempfile
        import threading
        import time

        out: dict[str, object] = {}
        out["json"] = json.loads(json.dumps({"a": [1, 2.5, None]}))
        out["re"] = re.findall(r"\d+", "a1b22c333")
        out["math"] = (math.sqrt(16.0), math.factorial(10), statistics.mean([1, 2, 3]))
        out["decimal"] = str(decimal.Decimal("1.1") + decimal.Decimal("2.2"))
        out["fractions"] = str(fractions.Fraction(1, 3) * 3)
        out["collections"] = collections.Counter("abca").most_common(1)
        out["itertools"] = list(itertools.permutations([1, 2]))
        out["hash"] = hashlib.sha256(b"x").hexdigest()[:8]
        out["random"] = random.Random(0).randint(0, 10**6)
        out["pid"] = os.getpid() > 0
        p = tmp_path / "f.txt"
        p.write_text("hello")
        out["file"] = (p.read_text(), sorted(os.listdir(tmp_path)))
        with tempfile.NamedTemporaryFile(dir=tmp_path) as tf:
            tf.write(b"x")
            out["tempfile"] = True
        t0 = time.monotonic()
        time.sleep(0.01)
        out["sleep"] = time.monotonic() - t0 >= 0.01
        fired = []
        signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        deadline = time.monotonic() + 5
        while not fired and time.monotonic() < deadline:
            time.sleep(0.005)
        out["itimer"] = bool(fired)
        m = mmap.mmap(-1, 1 << 20)
        m[:5] = b"mmap!"
        out["mmap"] = m[:5]
        box = []
        th = threading.Thread(target=lambda: box.append(sum(range(100))))  # clone3 -> ENOSYS -> clone
        th.start()
        th.join()
        out["thread"] = box
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        try:  # the fork works, the exec is refused
            subprocess.run([sys.executable, "-c", "print(6*7)"], capture_output=True)
            out["subprocess"] = "ran"
        except PermissionError:
            out["subprocess"] = "exec refused"
        out["status"] = _seccomp_status()["Seccomp"]
        return out

    got = in_child(work)
    assert got == {
        "json": {"a": [1, 2.5, None]},
        "re": ["1", "22", "333"],
        "math": (4.0, 3628800, 2),
        "decimal": "3.3",
        "fractions": "1",
        "collections": [("a", 2)],
        "itertools": [(1, 2), (2, 1)],
        "hash": "2d711642",
        "random": got["random"],
        "pid": True,
        "file": ("hello", ["f.txt"]),
        "tempfile": True,
        "sleep": True,
        "itimer": True,
        "mmap": b"mmap!",
        "thread": [4950],
        "fork": 7,
        "subprocess": "exec refused",
        "status": "2",  # SECCOMP_MODE_FILTER
    }


@live
def test_a_second_install_stacks():
    def after_two() -> tuple[str, str, int]:
        try:
            socket.socket()
            sock = "created"
        except PermissionError:
            sock = "PermissionError"
        return _seccomp_status()["Seccomp_filters"], sock, sum(range(10))

    assert in_child(after_two, installs=2) == ("2", "PermissionError", 45)


# ----------------------------------------------------------------------------- live: hostile corpus


def test_seccomp_corpus_is_there():
    assert len(S_FILES) >= 5
    for path in S_FILES:
        head = header(path)
        assert head.get("expect") == "ok" and "value" in head and head.get("about"), path.name


@live
@pytest.mark.parametrize("path", S_FILES, ids=[p.stem for p in S_FILES])
def test_hostile_program_under_the_filter(path: Path, unix_server, tmp_path: Path):
    srv, sock_path = unix_server
    ctx = {"unix_socket": sock_path, "sentinel_dir": str(tmp_path), "parent_pid": os.getpid(), "port": 9}
    source = path.read_text()

    def run() -> object:
        os.chdir(tmp_path)
        namespace: dict[str, object] = {"__name__": "__sample__"}
        exec(compile(source, str(path), "exec"), namespace)
        return namespace["f"](ctx)  # type: ignore[operator]

    assert in_child(run) == ast.literal_eval(header(path)["value"])
    assert _accepted(srv) == 0
