# expect: ok
# module level: the runner's keyword-only defaults lived in a dict that can be changed in place (only
# assigning __kwdefaults__ raised an audit event): the runner would canonicalize the output with the
# sample's function (output 999).
import codethinker.contra.tracer as t

try:
    kw = t.trace_runner.__kwdefaults__ or {}
    if "_helpers" in kw:
        rec, canon = kw["_helpers"]
        kw["_helpers"] = (rec, lambda v: 999)
except BaseException:
    pass


def f(x):
    y = len(str(x))
    y = y + 10
    return y
