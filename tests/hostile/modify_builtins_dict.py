# expect: ok
# about: changes the sample's __builtins__ mapping (a fresh copy per sample)
def f(ctx):
    __builtins__["len"] = lambda x: 0
    __builtins__["abs"] = lambda x: "pwned"
    return "patched"
