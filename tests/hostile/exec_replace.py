# expect: error|timeout|killed
# about: replaces the worker process with a shell (execve); refused (RLIMIT_NPROC, no_new_privs)
import os


def f(ctx):
    os.execv("/bin/sh", ["sh", "-c", "touch " + ctx["pwned"] + "; sleep 100"])
