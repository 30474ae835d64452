# expect: ok
# value: 'EPERM'
# about: binds an abstract Unix socket as a mailbox for later samples and connects to well-known abstract names (seccomp refuses socket())
import errno, socket


def f(ctx):
    try:
        box = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, "?")
    out = []
    try:
        box.bind(b"\0codethinker-mailbox")
        out.append("bound")
    except OSError as exc:
        out.append("bind " + errno.errorcode.get(exc.errno, "?"))
    names = [b"\0/tmp/.X11-unix/X0", b"\0/tmp/.X11-unix/X1", b"\0codethinker-mailbox"]
    try:
        with open("/proc/net/unix") as fh:
            names += [("\0" + line.split()[-1][1:]).encode() for line in fh if line.split()[-1].startswith("@")]
    except OSError:
        pass
    for name in names[:50]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(0.2)
                s.connect(name)
                out.append(name)
        except OSError:
            pass
    return out
