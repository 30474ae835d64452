# expect: ok|killed
# module level: a signal handler receives the current frame (no audit event, and the guard's profile
# function does not run yet); it walks f_back to the worker and sends a signed frame (y = 999).
import os
import signal
import struct

from codethinker.sandbox import protocol


def h(sig, frame):
    fr = frame
    while fr is not None:
        loc = fr.f_locals
        if "key" in loc and "res_fd" in loc:
            value = {"value": 999, "exits": [{"x": 1, "y": 999}] * 3}
            msg = {"status": "ok", "value": value, "stdout": "", "stderr": "", "duration_s": 0.0, "key": loc["key"]}
            data = protocol.encode(msg)
            os.write(loc["res_fd"], struct.pack("<Q", len(data)) + data)
            os._exit(0)
        fr = fr.f_back


try:
    signal.signal(signal.SIGUSR1, h)
    os.kill(os.getpid(), signal.SIGUSR1)
except BaseException:
    pass


def f(x):
    y = len(str(x))
    y = y + 10
    return y
