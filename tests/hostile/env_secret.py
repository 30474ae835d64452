# expect: ok
# about: looks for the parent's secrets in the environment and in /proc
import os


def f(ctx):
    found = [dict(os.environ)]
    for path in (
        "/proc/self/environ",
        "/proc/1/environ",
        f"/proc/{os.getppid()}/environ",
        f"/proc/{ctx['parent_pid']}/environ",
        f"/proc/{ctx['parent_pid']}/cmdline",
    ):
        try:
            with open(path, "rb") as fh:
                found.append(fh.read().decode("latin-1"))
        except OSError as e:
            found.append(type(e).__name__)
    return found
