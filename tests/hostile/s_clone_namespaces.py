# expect: ok
# value: ('EPERM', 'ENOSYS', 'PermissionError')
# about: makes a child in new user+net namespaces with a raw clone, with clone3 (flags in memory) and with os.unshare (seccomp: clone with CLONE_NEW* refused, clone3 ENOSYS)
import ctypes, errno, os

NR = {"x86_64": (56, 435), "aarch64": (220, 435)}


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    clone, clone3 = NR.get(os.uname().machine, (56, 435))
    flags = 0x10000000 | 0x40000000  # CLONE_NEWUSER | CLONE_NEWNET
    out = []
    ctypes.set_errno(0)
    pid = libc.syscall(ctypes.c_long(clone), ctypes.c_long(flags | 17), *[ctypes.c_long(0)] * 4)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    out.append(errno.errorcode.get(ctypes.get_errno(), "?") if pid < 0 else "child made")
    args = (ctypes.c_uint64 * 11)(
        flags, 0, 0, 0, 17
    )  # struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal
    ctypes.set_errno(0)
    pid = libc.syscall(ctypes.c_long(clone3), args, ctypes.c_long(ctypes.sizeof(args)))
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    out.append(errno.errorcode.get(ctypes.get_errno(), "?") if pid < 0 else "child made")
    try:
        if hasattr(os, "unshare"):
            os.unshare(0x10000000)
        elif libc.unshare(ctypes.c_int(0x10000000)) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        out.append("unshared")
    except OSError as exc:
        out.append(type(exc).__name__)
    return tuple(out)
