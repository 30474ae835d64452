# expect: error
# about: unbounded recursion under the default recursion limit -> RecursionError
def f(ctx):
    def g(n):
        return g(n + 1) + 1

    return g(0)
