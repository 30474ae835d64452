# expect: ok|error|killed
# about: registers a reducer for complex in copyreg (a registry that outlives the call) so that pickling a
#   later sample's result would run this sample's code; the reducer names a global the parent refuses
import copyreg


def _reduce(c):
    print("LEAK from copyreg")
    return (print, ("LEAK",))


def f(ctx):
    copyreg.pickle(complex, _reduce)
    return 1j
