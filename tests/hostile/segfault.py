# expect: killed
# about: dereferences a null pointer through ctypes (SIGSEGV)
import ctypes


def f(ctx):
    return ctypes.string_at(0)
