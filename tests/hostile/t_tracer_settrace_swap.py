# expect: ok
# A sample that swaps the trace function for its own while it runs: under the ConTra tracer the
# recorded flow would be whatever the replacement records; the guard reports it untraceable.
import sys


def f(x):
    y = len(str(x))
    sys.settrace(lambda *a: None)
    y = y + 10
    return y
