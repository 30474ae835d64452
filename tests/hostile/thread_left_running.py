# expect: error
# about: starts a thread that keeps running after the sample (threads count as processes: refused)
import threading, time


def f(ctx):
    def spin():
        while True:
            time.sleep(0.01)

    threading.Thread(target=spin, daemon=True).start()
    return "started"
