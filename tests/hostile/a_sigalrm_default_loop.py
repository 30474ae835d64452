# expect: timeout
# about: resets SIGALRM to its default action (the timer then kills the process) and loops
import signal


def f(ctx):
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    while True:
        pass
