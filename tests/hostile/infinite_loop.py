# expect: timeout
# about: a plain infinite loop; the in-worker timer stops it
def f(ctx):
    while True:
        pass
