# expect: ok
# about: signals the parent (real pid and parent pid), its process group and every process it can
import os, signal


def f(ctx):
    out = []
    for fn in (
        lambda: os.kill(ctx["parent_pid"], signal.SIGKILL),
        lambda: os.kill(os.getppid(), signal.SIGKILL),
        lambda: os.killpg(os.getpgid(ctx["parent_pid"]), signal.SIGKILL),
        lambda: os.kill(1, signal.SIGKILL),
        lambda: os.kill(-1, signal.SIGKILL),
    ):
        try:
            fn()
            out.append("sent")
        except OSError as e:
            out.append(type(e).__name__)
    return out
