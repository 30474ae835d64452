# expect: timeout
# about: signal tampering: blocks SIGALRM with pthread_sigmask, then loops
import signal


def f(ctx):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    while True:
        pass
