# expect: timeout
# about: prints forever: output is capped, the sample times out
def f(ctx):
    while True:
        print("x" * 1000)
