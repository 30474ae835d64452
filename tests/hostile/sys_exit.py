# expect: error
# about: SystemExit is an error, not an exit of the worker
import sys


def f(ctx):
    sys.exit(3)
