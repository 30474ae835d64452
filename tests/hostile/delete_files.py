# expect: ok
# value: True
# about: tries to delete and rename files outside the sandbox
import os, shutil


def f(ctx):
    blocked = []
    for op in (
        lambda: os.remove(ctx["sentinel"]),
        lambda: shutil.rmtree(ctx["sentinel_dir"]),
        lambda: os.rename(ctx["sentinel"], ctx["sentinel"] + ".moved"),
        lambda: os.chmod(ctx["sentinel"], 0),
    ):
        try:
            op()
            blocked.append(False)
        except OSError:
            blocked.append(True)
    return all(blocked)
