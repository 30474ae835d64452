# expect: ok
# about: opens its private dir and the dirs above it to everyone and leaves a file there, for the
#   next sample (another lane, another uid) to read
import os


def f(ctx):
    opened = []
    with open("left-behind", "w") as fh:
        fh.write("LEAK file")
    for path in (".", "..", "../.."):
        try:
            os.chmod(path, 0o777)
            opened.append(path)
        except OSError:
            pass
    return opened
