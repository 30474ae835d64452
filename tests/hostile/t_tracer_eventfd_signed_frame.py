# expect: ok|killed
# A sample that reads the job's key and result pipe through gc.garbage frames inside f and writes a
# signed result frame with os.eventfd_write (8 bytes a call: the length header, then the frame), a
# write the guard's profile function did not refuse.
import gc
import os

from codethinker.sandbox import protocol


def cycle():
    try:
        raise ValueError
    except ValueError as e:
        t = e.__traceback__  # noqa: F841
    return 0


def forge():
    gc.set_debug(gc.DEBUG_SAVEALL)
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
                data += b" " * (-len(data) % 8)
                words = [len(data)] + [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data), 8)]
                for w in words:
                    os.eventfd_write(loc["res_fd"], w)
                os._exit(0)
            fr = fr.f_back


def f(x):
    y = len(str(x))
    try:
        forge()
    except BaseException:
        pass
    y = y + 10
    return y
