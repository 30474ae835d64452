# expect: ok
# about: leaves a suspended generator with a finally clause in a cycle: if it were collected in a
# later sample it would print there
def f(ctx):
    def gen():
        try:
            yield 1
            yield 2
        finally:
            print("LEAK from an earlier sample")

    g = gen()
    next(g)
    cycle = [g]
    cycle.append(cycle)
    return 1
