# expect: ok|error
# about: an audit hook cannot be removed once added: it would see (and print into) every later sample
import sys


def _hook(event, args):
    if event in ("exec", "compile", "open"):
        print("LEAK audit", event)


def f(ctx):
    sys.addaudithook(_hook)
    compile("1", "<x>", "eval")
    return "hooked"
