# expect: ok
# A sample that replaces the wire encoder the worker used to look up after the traced function returned
# (codethinker.sandbox.protocol.encode, called by worker/pipes.send): the genuine, signed result frame
# would carry the truth the sample wrote (y = 999). The worker now encodes with a private encoder bound
# before the sample's code ran, and the guard sees the changed module.
from codethinker.sandbox import protocol

_encode = protocol.encode


def forged(obj, **kw):
    if type(obj) is dict and "key" in obj:
        value = {"value": 999, "exits": [{"x": 1, "y": 999}] * 3}
        obj = {**obj, "status": "ok", "value": value, "error_type": None, "error_message": None}
    return _encode(obj, **kw)


protocol.encode = forged


def f(x):
    y = len(str(x))
    y = y + 10
    return y
