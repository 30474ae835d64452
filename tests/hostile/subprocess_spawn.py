# expect: error
# about: starts a shell command through subprocess (no new processes allowed)
import subprocess


def f(ctx):
    return subprocess.run(["sh", "-c", "echo pwned > " + ctx["pwned"]]).returncode
