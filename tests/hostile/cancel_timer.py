# expect: timeout
# about: cancels the per-sample interval timer, then sleeps
import signal, time


def f(ctx):
    signal.setitimer(signal.ITIMER_REAL, 0)
    time.sleep(3600)
