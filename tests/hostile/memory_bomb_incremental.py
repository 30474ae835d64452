# expect: memory
# about: grows a list of 64 MB buffers until the address-space cap
def f(ctx):
    xs = []
    while True:
        xs.append(bytearray(64 * 1024 * 1024))
