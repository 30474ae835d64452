# expect: error
# about: returns a list nested 100000 deep (no literal form: NoLiteral, never a crash)
def f(ctx):
    x = []
    for _ in range(100_000):
        x = [x]
    return x
