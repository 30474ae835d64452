# expect: memory
# about: a 100 GB bytearray
def f(ctx):
    return len(bytearray(10**11))
