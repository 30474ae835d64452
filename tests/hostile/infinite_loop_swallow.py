# expect: timeout
# about: swallows every BaseException (the timer's too) and keeps looping: the parent SIGKILLs it
def f(ctx):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
