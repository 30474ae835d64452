# expect: ok
# value: 'blocked'
# about: connects to a server the test runs on the host's loopback (network namespace: refused)
import socket


def f(ctx):
    try:
        socket.create_connection(("127.0.0.1", ctx["port"]), timeout=0.5).sendall(b"pwned")
        return "connected"
    except OSError:
        return "blocked"
