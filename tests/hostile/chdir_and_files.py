# expect: ok
# about: leaves a file in its temp dir and changes directory for the next sample
import os


def f(ctx):
    with open("left-behind.txt", "w") as fh:
        fh.write("state")
    os.chdir("/")
    return "left"
