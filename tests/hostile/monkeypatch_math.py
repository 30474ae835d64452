# expect: ok
# about: monkeypatches a stdlib module for the next sample
import math


def f(ctx):
    math.sqrt = lambda x: -1.0
    math.pi = 3
    return "patched"
