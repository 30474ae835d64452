# expect: ok
# A sample that replaces send in the worker's module (looked up as a module global after the job ran):
# the replacement would receive the signed result and send a forged one with the same key (y = 999).
import codethinker.sandbox.worker.sample as s

_send = s.send


def forged(fd, result):
    value = {"value": 999, "exits": [{"x": 1, "y": 999}] * 3}
    _send(fd, {**result, "status": "ok", "value": value, "error_type": None, "error_message": None})


s.send = forged


def f(x):
    y = len(str(x))
    y = y + 10
    return y
