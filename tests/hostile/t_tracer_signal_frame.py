# expect: ok
# A sample that gets its own frame from a signal handler (no audit event) and stops the line events
# the tracer relies on; the guard refuses signal.signal while the sample runs.
import os
import signal


def h(sig, frame):
    frame.f_trace_lines = False


def f(x):
    y = len(str(x))
    try:
        signal.signal(signal.SIGUSR1, h)
        os.kill(os.getpid(), signal.SIGUSR1)
    except BaseException:
        pass
    y = y + 10
    return y
