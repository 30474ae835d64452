# expect: ok
# about: seeds the global random generator; the next sample must not see this sequence
import random


def f(ctx):
    random.seed(0)
    return random.random()
