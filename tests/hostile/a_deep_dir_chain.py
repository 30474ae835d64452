# expect: ok
# value: 3000
# about: a folder chain 3000 deep (deeper than the recursion limit, longer than PATH_MAX) with no
#   permissions at the bottom; clean-up must not crash the zygote nor leave it for the next sample
import os


def f(ctx):
    for _ in range(3000):
        os.mkdir("d")
        os.chdir("d")
    with open("bottom", "w") as fh:
        fh.write("x")
    os.chmod(".", 0)
    return 3000
