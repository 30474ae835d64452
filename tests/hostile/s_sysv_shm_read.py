# expect: ok
# value: 'EPERM'
# about: looks for SysV shared memory an earlier sample left (by its key and by scanning ids) to read its data (seccomp refuses shmget/shmat)
import ctypes, errno

KEY = 0x5EED0001


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(ctypes.c_int(KEY), ctypes.c_size_t(0), ctypes.c_int(0))
    if shmid < 0 and ctypes.get_errno() != errno.ENOENT:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    found = []
    for ident in ([shmid] if shmid >= 0 else []) + list(range(64)):
        addr = libc.shmat(ctypes.c_int(ident), None, ctypes.c_int(0o10000))  # SHM_RDONLY
        if addr not in (None, ctypes.c_void_p(-1).value):
            found.append(ctypes.string_at(addr, 27))
            libc.shmdt(ctypes.c_void_p(addr))
    if found:
        return found
    # nothing there: report how shmat itself answered
    libc.shmat(ctypes.c_int(0), None, ctypes.c_int(0o10000))
    return errno.errorcode.get(ctypes.get_errno(), "?")
