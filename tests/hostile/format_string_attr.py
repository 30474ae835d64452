# expect: ok
# about: reads attributes through str.format (read-only; returns text)
def f(ctx):
    return "{0.__class__.__name__}".format(ctx)
