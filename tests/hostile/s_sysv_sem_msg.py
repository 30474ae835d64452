# expect: ok
# value: ('EPERM', 'EPERM')
# about: creates a SysV semaphore set and a message queue holding a message under fixed keys, left for later samples (seccomp refuses semget/msgget)
import ctypes, errno

IPC_CREAT = 0o1000


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    out = []
    semid = libc.semget(ctypes.c_int(0x5EED0002), ctypes.c_int(4), ctypes.c_int(IPC_CREAT | 0o666))
    out.append(errno.errorcode.get(ctypes.get_errno(), "?") if semid < 0 else "semaphores created")
    msqid = libc.msgget(ctypes.c_int(0x5EED0003), ctypes.c_int(IPC_CREAT | 0o666))
    if msqid < 0:
        out.append(errno.errorcode.get(ctypes.get_errno(), "?"))
    else:
        msg = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + 16)
        ctypes.c_long.from_buffer(msg).value = 1
        msg[ctypes.sizeof(ctypes.c_long) : ctypes.sizeof(ctypes.c_long) + 4] = b"LEAK"
        libc.msgsnd(ctypes.c_int(msqid), msg, ctypes.c_size_t(16), ctypes.c_int(0))
        out.append("queue created")
    return tuple(out)
