# expect: timeout
# guard: fork_bomb_bounded
# about: unbounded fork bomb; runs only after fork_bomb_bounded proved that no fork succeeds
import os


def f(ctx):
    while True:
        try:
            if os.fork() == 0:
                while True:
                    os.fork()
        except OSError:
            pass
