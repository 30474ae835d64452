# expect: ok
# about: disables the garbage collector and changes its thresholds
import gc


def f(ctx):
    gc.disable()
    gc.set_threshold(1, 1, 1)
    return "tampered"
