# expect: error
# about: KeyboardInterrupt is an error too
def f(ctx):
    raise KeyboardInterrupt("ctrl-c")
