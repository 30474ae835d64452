# expect: ok
# value: 'stashed'
# about: a singledispatch generic with registered handlers, stashed in stdlib modules' dicts for a
#   later sample to find and call
import collections
import functools
import math
import string


@functools.singledispatch
def g(x):
    return x


@g.register
def _(x: int):
    print("LEAK from singledispatch")
    return x


def f(ctx):
    for mod in (functools, math, string, collections):
        setattr(mod, "LEAK_generic", g)
    g(1)
    return "stashed"
