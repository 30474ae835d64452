# expect: ok
# about: lowers the recursion limit for the next sample
import sys


def f(ctx):
    sys.setrecursionlimit(60)
    return sys.getrecursionlimit()
