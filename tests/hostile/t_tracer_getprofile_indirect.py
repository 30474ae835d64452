# expect: ok
# in f: sys.getprofile called through functools.partial (a C caller: no c_call event for it) returns
# the guard's profile function; its closure holds the guard's state, whose "runner" is the runner's
# frame, whose locals hold the recorded exits (y = 999).
import functools
import sys


def f(x):
    y = len(str(x))
    try:
        prof = functools.partial(sys.getprofile)()
        for c in prof.__closure__ or ():
            st = c.cell_contents
            if type(st) is dict and "runner" in st:
                for e in st["runner"].f_locals["exits"]:
                    e["y"] = 999
    except BaseException:
        pass
    y = y + 10
    return y
