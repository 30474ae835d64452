# expect: ok
# value: ('EPERM', 'EPERM')
# about: creates a user and mount namespace, then mounts a tmpfs inside it (kernel surface the design does not need; seccomp refuses unshare and mount)
import ctypes, errno, os, tempfile


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
    ctypes.set_errno(0)
    r = libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNS))
    unshare = errno.errorcode.get(ctypes.get_errno(), "?") if r != 0 else "unshared"
    target = tempfile.mkdtemp()
    ctypes.set_errno(0)
    r = libc.mount(b"none", target.encode(), b"tmpfs", ctypes.c_ulong(0), b"size=1m")
    mount = errno.errorcode.get(ctypes.get_errno(), "?") if r != 0 else "mounted"
    if r == 0:
        libc.umount2(target.encode(), ctypes.c_int(2))
    os.rmdir(target)
    return (unshare, mount)
