# expect: timeout
# about: one long C call that never returns to the interpreter loop (no signal check)
import math


def f(ctx):
    return math.factorial(10**8) % 7
