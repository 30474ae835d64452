# expect: ok
# value: ('EPERM', 'EPERM')
# about: sets up an io_uring instance (a large, often-exploited kernel interface; seccomp refuses io_uring_setup and io_uring_register)
import ctypes, errno, os

NR = {"x86_64": (425, 427), "aarch64": (425, 427)}


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    setup, register = NR.get(os.uname().machine, (425, 427))
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    ctypes.set_errno(0)
    fd = libc.syscall(ctypes.c_long(setup), ctypes.c_long(8), params)
    first = errno.errorcode.get(ctypes.get_errno(), "?") if fd < 0 else "ring created"
    if fd >= 0:
        os.close(fd)
    ctypes.set_errno(0)
    libc.syscall(ctypes.c_long(register), ctypes.c_long(-1), ctypes.c_long(0), None, ctypes.c_long(0))
    return (first, errno.errorcode.get(ctypes.get_errno(), "?"))
