# expect: killed|error|memory
# about: returns a 100 MB string (over the result frame cap)
def f(ctx):
    return "x" * 100_000_000
