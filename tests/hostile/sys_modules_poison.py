# expect: ok
# about: replaces modules in sys.modules so the next sample's import gets a fake
import sys, types


def f(ctx):
    fake = types.ModuleType("math")
    fake.sqrt = lambda x: -1.0
    fake.pi = 3
    sys.modules["math"] = fake
    sys.modules["string"] = fake
    return "poisoned"
