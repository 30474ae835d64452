# expect: ok
# value: ('EPERM', 'EPERM', True)
# about: turns off address-space randomisation and makes readable memory executable through personality() (seccomp refuses all but the query)
import ctypes, errno


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    out = []
    for persona in (0x0040000, 0x0400000):  # ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC
        ctypes.set_errno(0)
        r = libc.personality(ctypes.c_ulong(persona))
        out.append(errno.errorcode.get(ctypes.get_errno(), "?") if r == -1 else "changed")
    out.append(libc.personality(ctypes.c_ulong(0xFFFFFFFF)) != -1)
    return tuple(out)
