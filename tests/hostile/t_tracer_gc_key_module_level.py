# expect: ok|killed
# A sample that, at module level (before the tracer's profile function exists), reaches the worker's
# frames through gc.garbage, reads the job's key and its result pipe, and sends a signed result frame
# of its own (y = 999). The map() call raises no c_call event: only the seal refuses it.
import gc
import os
import struct

from codethinker.sandbox import protocol


def cycle():
    try:
        raise ValueError
    except ValueError as e:
        t = e.__traceback__  # noqa: F841
    return 0


def forge():
    list(map(gc.set_debug, [gc.DEBUG_SAVEALL]))
    cycle()
    gc.collect()
    for o in list(gc.garbage):
        fr = o if type(o).__name__ == "frame" else None
        while fr is not None:
            loc = fr.f_locals
            if "key" in loc and "res_fd" in loc:
                value = {"value": 999, "exits": [{"x": 1, "y": 999}] * 3}
                frame = {"status": "ok", "value": value, "stdout": "", "stderr": "", "duration_s": 0.0}
                data = protocol.encode({**frame, "key": loc["key"]})
                os.write(loc["res_fd"], struct.pack("<Q", len(data)) + data)
                os._exit(0)
            fr = fr.f_back


try:
    forge()
except BaseException:
    pass


def f(x):
    y = len(str(x))
    y = y + 10
    return y
