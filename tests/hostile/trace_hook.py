# expect: ok
# about: installs a trace function and a profile function for later samples
import sys


def f(ctx):
    sys.settrace(lambda *a: print("LEAK"))
    sys.setprofile(lambda *a: print("LEAK"))
    return "hooked"
