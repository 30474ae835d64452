# expect: ok|error
# about: registers a codec search function (kept by the interpreter for good) that prints into whatever
#   sample looks a codec up next
import codecs


def _search(name):
    print("LEAK from a codec search function")
    return None


def f(ctx):
    codecs.register(_search)
    try:
        "x".encode("leak_codec")
    except LookupError:
        pass
    return "registered"
