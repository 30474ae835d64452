# expect: ok|error
# about: leaves a System V shared memory segment (mode 0666) holding data for a later sample
import ctypes


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(0x1EA4, 1 << 20, 0o1000 | 0o666)
    if shmid < 0:
        return "refused"
    addr = libc.shmat(shmid, None, 0)
    ctypes.memmove(addr, b"LEAK shm", 8)
    return "left"
