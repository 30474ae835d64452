# expect: ok
# about: os.system cannot fork: it returns an error status and the file is never created
import os


def f(ctx):
    rc = os.system("touch " + ctx["pwned"])
    return rc != 0
