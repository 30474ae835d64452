# expect: ok
# about: a __del__ in a reference cycle (would run during a later sample's garbage collection)
class Leaky:
    def __del__(self):
        print("LEAK from an earlier sample")


def f(ctx):
    a = Leaky()
    a.self = a
    return 1
