# expect: ok
# value: 0
# about: bounded fork bomb (200 tries): counts forks that succeed; containment means 0
import os


def f(ctx):
    n = 0
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError:
            continue
        if pid == 0:
            os._exit(0)
        n += 1
        os.waitpid(pid, 0)
    return n
