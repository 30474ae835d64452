# expect: ok
# value: 1
# about: a class built by calling the metaclass (no class statement, no dunder in the source) holding a
#   finalizer in a reference cycle; it must never run (or print) during a later sample
def f(ctx):
    T = type(int)
    X = T("X", (), {"_" * 2 + "del" + "_" * 2: lambda self: print("LEAK from an earlier sample")})
    a = X()
    a.me = a
    return 1
