# expect: ok|error|timeout
# about: fills the private temp dir with files until the size limits stop it
import os


def f(ctx):
    i = 0
    while True:
        with open(f"junk{i}", "wb") as fh:
            fh.write(b"x" * 8_000_000)
        i += 1
