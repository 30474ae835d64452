"""The seccomp-BPF program of :mod:`codethinker.sandbox.seccomp`: kernel constants, the syscall
tables of the architectures it knows (x86_64, aarch64) and the assembly of the classic-BPF
program from them. Pure data and bytes: nothing here touches the process."""

from __future__ import annotations

import errno
import struct
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ARCHES", "DENIED", "SOCK_FILTER", "SPECIAL", "ArchTable", "build_program"]

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
