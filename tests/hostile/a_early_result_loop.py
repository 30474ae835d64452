# expect: ok|killed
# about: writes a well-formed result frame on every fd before its code returns, then keeps running
#   (as if to stay alive beside the next sample)
import os
import pickle
import struct


def f(ctx):
    data = pickle.dumps({"status": "ok", "value": "forged", "stdout": "", "stderr": ""})
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack("<Q", len(data)) + data)
        except OSError:
            pass
    while True:
        pass
