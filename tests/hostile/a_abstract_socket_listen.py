# expect: ok|error
# about: listens on an abstract Unix socket (no file, shared by the network namespace) for a later sample
import socket


def f(ctx):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0codethinker-leak")
    s.listen(1)
    f.keep = s
    return "listening"
