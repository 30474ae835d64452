# expect: ok
# value: 'EPERM'
# about: creates a 64 MiB SysV shared-memory segment under a fixed key, fills it and leaves it for later samples (seccomp refuses shmget)
import ctypes, errno

KEY = 0x5EED0001
IPC_CREAT = 0o1000


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    size = 64 << 20
    shmid = libc.shmget(ctypes.c_int(KEY), ctypes.c_size_t(size), ctypes.c_int(IPC_CREAT | 0o666))
    if shmid < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    addr = libc.shmat(ctypes.c_int(shmid), None, ctypes.c_int(0))
    if addr in (None, ctypes.c_void_p(-1).value):
        return "created, not attached"
    ctypes.memset(addr, 0x41, size)
    ctypes.memmove(addr, b"LEAK from an earlier sample", 27)
    libc.shmdt(ctypes.c_void_p(addr))
    return "created and left"
