# expect: ok|killed
# module level: a profile function gets frames (the armed guard used to record sys.setprofile and let
# it through); it walks f_back to the worker, reads the key and the result pipe, sends a signed frame.
import os
import struct
import sys

from codethinker.sandbox import protocol


def p(frame, event, arg):
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
    sys.setprofile(p)
    len("x")
except BaseException:
    pass
sys.setprofile(None)


def f(x):
    y = len(str(x))
    y = y + 10
    return y
