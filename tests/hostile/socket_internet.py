# expect: ok
# value: 'blocked'
# about: tries to reach the internet (DNS server) over UDP and TCP
import socket


def f(ctx):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"x", ("8.8.8.8", 53))
        return "sent"
    except OSError:
        pass
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=0.5)
        return "connected"
    except OSError:
        return "blocked"
