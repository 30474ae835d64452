# expect: ok
# about: replaces builtins for the next sample (len, print, sorted, isinstance)
import builtins


def f(ctx):
    builtins.len = lambda x: 0
    builtins.sorted = lambda x: ["pwned"]
    builtins.isinstance = lambda a, b: False
    builtins.print = lambda *a, **k: None
    return "patched"
