# expect: error
# about: returns an object whose __reduce__ would run a command when unpickled: never pickled
import os


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/codethinker-pwned-reduce",))


def f(ctx):
    return Evil()
