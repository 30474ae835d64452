# expect: ok
# value: ('EPERM', 'EPERM', 'EPERM')
# about: attaches to pid 1 with ptrace and reads memory of pid 1 and of itself with process_vm_readv (seccomp refuses both calls)
import ctypes, errno, os


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _readv(libc, pid, addr):
    buf = ctypes.create_string_buffer(64)
    local = _Iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = _Iovec(addr, 64)
    ctypes.set_errno(0)
    n = libc.process_vm_readv(
        ctypes.c_int(pid),
        ctypes.byref(local),
        ctypes.c_ulong(1),
        ctypes.byref(remote),
        ctypes.c_ulong(1),
        ctypes.c_ulong(0),
    )
    return errno.errorcode.get(ctypes.get_errno(), "?") if n < 0 else f"read {n} bytes"


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    PTRACE_ATTACH = 16
    ctypes.set_errno(0)
    r = libc.ptrace(ctypes.c_long(PTRACE_ATTACH), ctypes.c_long(1), None, None)
    attach = errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "attached"
    own = ctypes.create_string_buffer(b"own memory", 64)
    return (attach, _readv(libc, 1, 0x400000), _readv(libc, os.getpid(), ctypes.addressof(own)))
