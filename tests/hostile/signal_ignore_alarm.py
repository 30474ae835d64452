# expect: timeout
# about: signal tampering: ignores SIGALRM, then loops; the parent's hard deadline kills it
import signal


def f(ctx):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        pass
