# expect: ok
# value: 'EPERM'
# about: connects to Unix socket files of the host, visible through the read-only bind of / (ctx's, /run/*.sock, docker, /tmp/*.sock ...) and sends data (seccomp refuses socket())
import errno, glob, socket


def f(ctx):
    try:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, "?")
    probe.close()
    paths = [ctx.get("unix_socket")] if ctx.get("unix_socket") else []
    for pattern in (
        "/run/*.sock",
        "/run/*/*.sock",
        "/var/run/*.sock",
        "/var/run/docker.sock",
        "/tmp/*.sock",
        "/tmp/*/*.sock",
        "/run/user/*/bus",
        "/run/dbus/system_bus_socket",
        "/dev/log",
    ):
        paths += glob.glob(pattern)
    connected = []
    for path in paths[:50]:
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
            try:
                with socket.socket(socket.AF_UNIX, kind) as s:
                    s.settimeout(0.2)
                    s.connect(path)
                    s.send(b"pwned from the sandbox\n")
                connected.append(path)
                break
            except OSError:
                pass
    return sorted(set(connected)) or "nothing reachable"
