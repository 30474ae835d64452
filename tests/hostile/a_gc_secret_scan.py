# expect: ok
# value: []
# about: scans every object the collector knows (and code constants) for an earlier sample's secret
#   (the corpus test runs a sample holding "src-secret-..." in its source just before each program)
import gc


def f(ctx):
    prefix = "src" + "-secret-"
    found = set()
    for o in gc.get_objects():
        items = o.values() if type(o) is dict else o if type(o) in (list, tuple, set, frozenset) else ()
        for v in items:
            if type(v) is str and v.startswith(prefix):
                found.add(v)
        if type(o).__name__ == "code":
            found.update(c for c in o.co_consts if type(c) is str and c.startswith(prefix))
    return sorted(v for v in found if len(v) > len(prefix))
