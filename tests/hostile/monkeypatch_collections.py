# expect: ok
# about: monkeypatches a stdlib class for the next sample
import collections


def f(ctx):
    collections.Counter.most_common = lambda self, n=None: [("pwned", 1)]
    return "patched"
