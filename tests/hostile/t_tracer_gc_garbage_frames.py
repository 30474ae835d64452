# expect: ok
# A sample that reaches frames through gc.garbage (gc.set_debug(gc.DEBUG_SAVEALL) keeps a collected
# frame cycle), walks f_back (3.11 raises no audit event for it) to the tracer's runner and rewrites
# the recorded exits (y = 999). The armed guard has replaced gc.set_debug and removed gc.garbage.
import gc


def cycle():
    try:
        raise ValueError
    except ValueError as e:
        t = e.__traceback__  # noqa: F841 (the frame holds its traceback, which holds the frame)
    return 0


def f(x):
    y = len(str(x))
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        cycle()
        gc.collect()
        for o in list(gc.garbage):
            fr = o if type(o).__name__ == "frame" else None
            while fr is not None:
                ex = fr.f_locals.get("exits")
                if type(ex) is list:
                    for e in ex:
                        e["y"] = 999
                fr = fr.f_back
        gc.set_debug(0)
        del gc.garbage[:]
    except BaseException:
        pass
    y = y + 10
    return y
