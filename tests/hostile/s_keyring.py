# expect: ok
# value: ('EPERM', 'EPERM')
# about: stores a secret in the uid's user keyring, which every later sample of the same uid could read (seccomp refuses add_key and keyctl)
import ctypes, errno


def f(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    import os

    add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine, (248, 250))
    KEY_SPEC_USER_KEYRING = -4
    data = b"LEAK secret for a later sample"
    ctypes.set_errno(0)
    r = libc.syscall(
        ctypes.c_long(add_key),
        b"user",
        b"codethinker-leak",
        data,
        ctypes.c_long(len(data)),
        ctypes.c_long(KEY_SPEC_USER_KEYRING),
    )
    added = errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "key added"
    ctypes.set_errno(0)
    r = libc.syscall(
        ctypes.c_long(keyctl), ctypes.c_long(0), ctypes.c_long(KEY_SPEC_USER_KEYRING), ctypes.c_long(0)
    )  # KEYCTL_GET_KEYRING_ID
    got = errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "keyring visible"
    return (added, got)
