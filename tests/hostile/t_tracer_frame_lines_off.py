# expect: ok
# A sample that turns off line events of its own frame (reached through sys._getframe), so the
# tracer would record block exits late; the guard refuses the frame and reports it untraceable.
import sys


def f(x):
    y = len(str(x))
    try:
        sys._getframe().f_trace_lines = False
    except BaseException:
        pass
    y = y + 10
    return y
