# expect: ok
# value: 0
# about: fork, vfork-like posix_spawn and a thread, now that every sample has a process of its own
import os
import threading


def f(ctx):
    made = 0
    for _ in range(20):
        try:
            pid = os.fork()
        except OSError:
            continue
        if pid == 0:
            os._exit(0)
        made += 1
    try:
        os.posix_spawn("/bin/true", ["true"], {})
        made += 1
    except OSError:
        pass
    try:
        threading.Thread(target=lambda: None).start()
        made += 1
    except RuntimeError:
        pass
    return made
