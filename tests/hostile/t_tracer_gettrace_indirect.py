# expect: ok
# in f: sys.gettrace called through a bound method-wrapper (no c_call event for sys.gettrace) returns
# the tracer's trace function; its closure holds the recorded exits (y = 999).
import sys


def f(x):
    y = len(str(x))
    try:
        t = sys.gettrace.__call__()
        for c in t.__closure__ or ():
            v = c.cell_contents
            for d in getattr(v, "__closure__", None) or ():
                if type(d.cell_contents) is list:
                    for e in d.cell_contents:
                        if type(e) is dict:
                            e["y"] = 999
    except BaseException:
        pass
    y = y + 10
    return y
