# expect: ok|error
# about: opens files until the descriptor limit
def f(ctx):
    fhs = []
    while True:
        fhs.append(open("/dev/null"))
