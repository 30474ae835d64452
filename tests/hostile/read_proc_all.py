# expect: ok
# about: scans every visible /proc/<pid>/environ for the secret
import os


def f(ctx):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    found.append(fh.read().decode("latin-1"))
            except OSError:
                pass
    return found
