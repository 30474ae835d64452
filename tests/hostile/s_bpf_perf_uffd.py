# expect: ok
# value: ('EPERM', 'EPERM', 'EPERM')
# about: reaches bpf(), perf_event_open() and userfaultfd(), kernel interfaces behind many exploits (seccomp refuses all three)
import ctypes, errno, os

NR = {"x86_64": (321, 298, 323), "aarch64": (280, 241, 282)}


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    bpf, perf, uffd = NR.get(os.uname().machine, NR["x86_64"])
    out = []
    attr = (ctypes.c_uint32 * 32)(2, 4, 4, 16)  # BPF_MAP_TYPE_ARRAY, key 4, value 4, 16 entries
    perf_attr = (ctypes.c_uint32 * 32)(1, 128, 0)  # PERF_TYPE_SOFTWARE, size, PERF_COUNT_SW_CPU_CLOCK
    for args in ((bpf, 0, attr, 128), (perf, perf_attr, 0, -1, -1, 0), (uffd, 1)):  # uffd: UFFD_USER_MODE_ONLY
        ctypes.set_errno(0)
        fd = libc.syscall(ctypes.c_long(args[0]), *(ctypes.c_long(a) if isinstance(a, int) else a for a in args[1:]))
        if fd >= 0:
            os.close(fd)
            out.append("fd")
        else:
            out.append(errno.errorcode.get(ctypes.get_errno(), "?"))
    return tuple(out)
