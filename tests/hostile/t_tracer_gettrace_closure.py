# expect: ok
# A sample that reaches the tracer's recorded exits through sys.gettrace() and the closures of the
# trace function, and rewrites them (y = 999 in the recorded locals); the guard refuses
# sys.gettrace while the sample runs.
import sys


def f(x):
    y = len(str(x))
    try:
        t = sys.gettrace()
        for c in t.__closure__ or ():
            v = c.cell_contents
            if callable(v) and getattr(v, "__closure__", None):
                for d in v.__closure__:
                    if type(d.cell_contents) is list:
                        for e in d.cell_contents:
                            e["y"] = 999
    except BaseException:
        pass
    y = y + 10
    return y
