# expect: ok
# value: 'registered'
# about: atexit handlers that would print and write a file if the process ever ran its exit hooks
import atexit


def _bye(path):
    print("LEAK from atexit")
    with open(path, "w") as fh:
        fh.write("atexit ran")


def f(ctx):
    atexit.register(_bye, ctx["pwned"])
    atexit.register(print, "LEAK from atexit")
    return "registered"
