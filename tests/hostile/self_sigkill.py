# expect: killed
# about: the worker SIGKILLs itself
import os, signal


def f(ctx):
    os.kill(os.getpid(), signal.SIGKILL)
