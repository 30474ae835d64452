# expect: killed|error|memory|timeout
# about: raises the recursion limit and recurses until the stack or the memory cap gives out
import sys


def f(ctx):
    sys.setrecursionlimit(10**7)

    def g(n):
        return g(n + 1) + 1

    return g(0)
