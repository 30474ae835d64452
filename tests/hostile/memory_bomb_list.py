# expect: memory
# about: one huge allocation
def f(ctx):
    return len([0] * 10**10)
