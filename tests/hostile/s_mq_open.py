# expect: ok
# value: 'EPERM'
# about: creates a POSIX message queue holding a message for later samples (seccomp refuses mq_open)
import ctypes, errno, os


def f(ctx):
    nr = {"x86_64": 240, "aarch64": 180}.get(os.uname().machine, 240)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    O_RDWR, O_CREAT = 0o2, 0o100
    ctypes.set_errno(0)
    mqd = libc.syscall(
        ctypes.c_long(nr), b"codethinker-leak", ctypes.c_long(O_RDWR | O_CREAT), ctypes.c_long(0o666), None
    )
    if mqd < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    os.close(mqd)
    return "queue created"
