# expect: timeout|error
# about: raises an exception whose __str__ never returns
class Bad(Exception):
    def __str__(self):
        while True:
            pass


def f(ctx):
    raise Bad()
