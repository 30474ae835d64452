"""The tracer's truth against a sample that runs in its process: the function traced is the given def,
LOCALS hold only names the frame can read, the result pipe is written only by the worker, the guard
refuses in its own hook what it refuses outside, the sealed functions are out of reach, and nothing the
worker or the tracer runs after the sample's code looks up a module global or builtin."""

from __future__ import annotations

import dis
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from codethinker.contra import _guard, _guard_rules, _guard_seal, trace_worker
from codethinker.contra.normalize import normalize_source
from codethinker.contra.tracer import trace
from codethinker.sandbox import Job
from codethinker.sandbox.protocol import encoding
from codethinker.sandbox.worker import pipes, sample

TRUE_FLOW = [{"x": 1, "y": 1}, {"x": 1, "y": 11}, {"x": 1, "y": 11}]


@pytest.fixture(scope="module")
def sb():
    from codethinker.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(timeout_s=2.0, workers=1)) as box:
        yield box


def flows(out) -> list[dict]:
    return [b.locals for b in out.flow.blocks] if out.ok else []


# --------------------------------------------------------------------------- the traced function
DECORATOR_SWAP = """
def deco(fn):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@deco
def f(x):
    y = len(str(x))
    y = y + 10
    return y
"""


def test_a_decorator_that_swaps_the_function_is_untraceable(sb):
    """The truth would describe the wrapper: one block, {'args': (1,), 'kwargs': {}}."""
    out = trace(DECORATOR_SWAP, "1", sandbox=sb)
    assert not out.ok, flows(out)
    assert "decorated" in out.reason


@pytest.mark.parametrize(
    ("src", "error"),
    [
        (DECORATOR_SWAP, "EntryReplaced"),  # the wrapper
        ("import functools\n@functools.lru_cache\ndef f(x):\n    return x\n", "EntryReplaced"),  # a C wrapper
        ("def f(x):\n    return x + 1\ndef g(x):\n    return x\nf = g\n", "EntryReplaced"),  # another def's code
        ("def f(x):\n    return x\nf = type(f)(f.__code__, {}, 'f')\n", "TraceTampered"),  # built, other globals
        ("def f(x):\n    return x\ndef f(x):\n    return x + 1\n", None),  # the last def is the entry
        ("def keep(fn):\n    return fn\n@keep\ndef f(x):\n    return x + 1\n", None),  # the def itself
    ],
)
def test_the_worker_runs_only_the_function_the_def_made(sb, src, error):
    """``Job.entry_def``: checked in the worker against the code object compiled from the source
    (the parent also refuses a decorated entry, so this is the second line)."""
    options = {"starts": [0]}
    res = sb.run(Job(src, (1,), {}, "f", runner="trace", options=options, entry_def=True))
    if error is None:
        assert res.status == "ok", res
        assert res.value["value"] == 2
    else:
        assert res.status == "error" and res.error_type == error, res


REBUILT_BY_A_FINALIZER = """
import types


class Evil:
    def __del__(self):
        g = globals()
        g["f"] = types.FunctionType(g["f"].__code__, g, "f", (100,))


globals()["f"] = Evil()


def f(x, k=1):
    y = x + k
    return y
"""


def test_a_function_rebuilt_around_the_defs_code_is_untraceable(sb):
    """The def's store into the module replaces the object bound to ``f``, whose finalizer then binds
    a function with the def's code and globals but other defaults (k=100): the worker's check of code
    and globals would pass, but building a function object is refused in an armed process."""
    out = trace(REBUILT_BY_A_FINALIZER, "1", sandbox=sb)
    assert not out.ok, flows(out)
    assert "function.__new__" in out.reason


def test_the_worker_does_not_check_without_entry_def(sb):
    res = sb.run(Job("def keep(fn):\n    return lambda x: fn(x) + 1\n@keep\ndef f(x):\n    return x\n", (1,)))
    assert res.status == "ok" and res.value == 2


# --------------------------------------------------------------------------- LOCALS
GHOST = "def f(x):\n    y = len(str(x))\n    locals()['ghost'] = 123\n    y = y + 10\n    return y\n"


def test_a_name_the_frame_cannot_read_is_never_in_locals(sb):
    """``locals()['ghost'] = 123`` writes into the frame's locals dict only: the program cannot
    read ``ghost``, so no LOCALS holds it."""
    out = trace(GHOST, "1", sandbox=sb)
    assert out.ok, out.reason
    assert flows(out) == [{"x": 1, "y": 1}, {"x": 1, "y": 1}, {"x": 1, "y": 11}, {"x": 1, "y": 11}]


def test_a_key_that_is_not_a_str_in_the_locals_dict_is_untraceable(sb):
    src = "def f(x):\n    y = x\n    locals()[1] = 2\n    y = y + 10\n    return y\n"
    out = trace(src, "1", sandbox=sb)
    assert not out.ok and "not a str" in out.reason


def test_cell_variables_are_locals(sb):
    src = "def f(x):\n    y = x + 1\n    g = lambda: y\n    return g()\n"
    out = trace(src, "1", sandbox=sb)
    assert out.ok and flows(out) == [{"x": 1, "y": 2}, {"x": 1, "y": 2}, {"x": 1, "y": 2}]


# --------------------------------------------------------------------------- the result channel
FIND_PIPE = """
import io, os, stat
def pipe_fds():
    fds = []
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                fds.append(fd)
        except OSError:
            pass
    return fds
"""
WRITES = {
    "eventfd_write": "os.eventfd_write(fd, 8)",
    "writev": "os.writev(fd, [b'x'])",
    "write_via_map": "list(map(os.write, [fd], [b'x']))",
    "sendfile_via_map": (
        "open('src', 'wb').write(b'x'); list(map(os.sendfile, [fd], [os.open('src', os.O_RDONLY)], [0], [1]))"
    ),
    "splice": "open('src', 'wb').write(b'x'); os.splice(os.open('src', os.O_RDONLY), fd, 1)",
    "fileio": "io.FileIO(fd, 'w').write(b'x')",
    "open_fd": "open(fd, 'wb').write(b'x')",
    "proc_self_fd": "open(f'/proc/self/fd/{fd}', 'wb').write(b'x')",
    "dev_fd": "open(f'/dev/fd/{fd}', 'wb').write(b'x')",
    "link_to_proc_fd": "os.symlink(f'/proc/self/fd/{fd}', 'p'); open('p', 'wb').write(b'x')",
}


@pytest.mark.parametrize("route", sorted(WRITES))
def test_the_result_pipe_is_written_only_by_the_worker(sb, route):
    """Each way to write to a file descriptor the worker holds is refused and recorded (untraceable
    as tampering), whether or not the sample knows the job's key."""
    body = textwrap.indent(f"for fd in pipe_fds():\n    {WRITES[route]}\n", "        ")
    src = FIND_PIPE + f"def f(x):\n    y = x\n    try:\n{body}    except BaseException:\n        pass\n    return y\n"
    out = trace(src, "1", sandbox=sb)
    assert not out.ok, flows(out)
    assert "tamper" in out.reason, out.reason


@pytest.mark.parametrize("route", ["write_via_map", "fileio", "proc_self_fd"])
def test_the_result_pipe_is_refused_at_module_level_too(sb, route):
    body = textwrap.indent(f"for fd in pipe_fds():\n    {WRITES[route]}\n", "    ")
    src = FIND_PIPE + f"try:\n{body}except BaseException:\n    pass\ndef f(x):\n    y = x\n    return y\n"
    out = trace(src, "1", sandbox=sb)
    assert not out.ok and "tamper" in out.reason, out.reason


# --------------------------------------------------------------------------- the hook itself
BUSY_HASH = """
import sys
class Name(str):
    def __hash__(self):
        fr = sys._getframe()
        while fr is not None:
            ex = fr.f_locals.get("exits")
            if type(ex) is list:
                for e in ex:
                    e["y"] = 999
            fr = fr.f_back
        return str.__hash__(self)
def f(x):
    y = len(str(x))
    try:
        sys.audit("object.__getattr__", None, Name("f_code"))
    except BaseException:
        pass
    y = y + 10
    return y
"""


def test_the_guard_never_runs_the_samples_code_unguarded(sb):
    """A forged audit event whose attribute name is a str subclass: the hook does not hash it (and
    while the hook works it refuses every event but its own), so its ``__hash__`` gets no frame."""
    out = trace(BUSY_HASH, "1", sandbox=sb)
    assert not out.ok or flows(out) == [*TRUE_FLOW[:1], *TRUE_FLOW], flows(out)


@pytest.mark.parametrize(
    "attack",
    [
        "gc.callbacks.clear()",
        "setattr(gc, 'garbage', [])",
        "gc.garbage",
        "__import__('_imp').create_builtin(type('S', (), {'name': 'gc'})())",
        "sys.modules.pop('gc'); __import__('gc')",
        "sys.settrace(None)",
        "t.trace_runner.__defaults__",
        "sample._execute.__defaults__",
    ],
)
def test_the_seal_and_the_guards_reads_at_module_level(sb, attack):
    src = (
        "import gc, sys\nimport codethinker.contra.tracer as t\nimport codethinker.sandbox.worker.sample as sample\n"
        f"try:\n    {attack}\nexcept BaseException:\n    pass\ndef f(x):\n    y = x\n    return y\n"
    )
    out = trace(src, "1", sandbox=sb)
    assert not out.ok and "tamper" in out.reason, out.reason


# --------------------------------------------------------------------------- nothing patchable
def _nested(code: types.CodeType, top: bool = False) -> list[types.CodeType]:
    """The code objects inside ``code``; with ``top``, not the comprehensions of ``code`` itself (a
    factory's comprehensions run when the factory does)."""
    out = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and not (top and c.co_name.startswith("<")):
            out += [c, *_nested(c)]
    return out


def _globals_read(code: types.CodeType) -> set[str]:
    return {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}


# (function, its own code checked too, globals it may read: only before the sample's code runs)
BOUND = [
    (trace_worker.trace_runner, True, set()),
    (trace_worker._block_recorder, True, set()),
    (trace_worker._snapshot, True, set()),
    (_guard_rules.denied_event, True, set()),
    (_guard_rules.denied_call, True, set()),
    (_guard_rules.armed_read, True, set()),
    (_guard._same_dict, True, set()),
    (_guard._signal_handlers, True, set()),
    (_guard.begin, True, set()),
    (_guard.end, True, set()),
    (_guard.check, True, set()),
    (_guard._recorders, False, set()),
    (_guard._profile_function, False, set()),
    (_guard._preconditions, False, set()),
    (_guard._gate, False, set()),
    (_guard._armed_refusal, False, set()),
    (_guard._audit_hook, False, set()),
    (_guard.install, False, set()),
    (_guard_seal.make_seal, False, set()),
    (encoding.make_encoder, False, set()),
    (pipes.make_sender, False, set()),
    (sample._make_reply, False, set()),
    (sample._make_restore, False, set()),
    (sample._entry_problem, True, set()),
    (sample._execute, True, set()),
    (sample._run_job, True, {"Capped", "sys"}),  # both before _execute runs the sample
]


@pytest.mark.parametrize("fn,own,allowed", BOUND, ids=[f"{b[0].__module__}.{b[0].__name__}" for b in BOUND])
def test_code_run_after_the_samples_code_reads_no_module_global(fn, own, allowed):
    """A sample can patch any module attribute or builtin silently: what runs after its code starts
    reads its helpers from defaults or closures bound before (a factory's own body runs before)."""
    codes = [fn.__code__, *_nested(fn.__code__)] if own else _nested(fn.__code__, top=True)
    assert codes
    read = set().union(*(_globals_read(c) for c in codes))
    assert read <= allowed, read - allowed


def test_no_function_with_defaults_uses_a_mutable_default():
    """Keyword-only defaults live in a dict that can be changed in place: none of these has any."""
    for fn, _own, _allowed in BOUND:
        assert fn.__kwdefaults__ is None, fn.__name__


SEAL_PROBE = """
import gc, importlib, json, sys, types
sys.path[:0] = [{root!r}]
from codethinker.sandbox.worker.main import PRELOAD
for name in (*PRELOAD, *sys.builtin_module_names):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
import codethinker.contra.tracer, codethinker.contra.values
import codethinker.sandbox.worker.sample
from codethinker.contra import _guard_rules, _guard_seal
present = [(m, n) for m, n in _guard_rules.SEALED if m in sys.modules and n in vars(sys.modules[m])]
originals = {{f"{{m}}.{{n}}": vars(sys.modules[m])[n] for m, n in present}}
garbage_id = id(gc.garbage)  # the collector's own list: it outlives the module attribute
st = {{"gate": False, "tripped": None, "sticky": None}}
apply, on_gc, sealed = _guard_seal.make_seal(st, gc.get_debug, gc.set_debug, gc.garbage, gc.callbacks)
apply()
broken = sealed()
del apply, on_gc, sealed, st  # in a sample's process only the guard's hook holds these closures
wanted = {{id(v): k for k, v in originals.items()}}
wanted[garbage_id] = "gc.garbage"
skip = {{id(originals), id(wanted), id(present)}}
seen, stack, found = set(), list(sys.modules.values()), set()
while stack:
    o = stack.pop()
    if id(o) in seen or id(o) in skip or isinstance(o, types.FrameType):
        continue
    seen.add(id(o))
    if id(o) in wanted and o is not None:
        found.add(wanted[id(o)])
    stack.extend(gc.get_referents(o))
print(json.dumps({{"sealed": broken, "reachable": sorted(found), "n": len(originals)}}))
"""


def test_no_sealed_original_is_reachable_from_any_module():
    """After the seal, none of the replaced functions (nor gc's garbage list) can be reached from
    sys.modules through any reference (function defaults, closures, ``__wrapped__``, class dicts ...),
    in a process that imported what a zygote imports."""
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", SEAL_PROBE.format(root=root)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["n"] >= 20
    assert res["reachable"] == [], res
    assert res["sealed"] is None


def test_normalize_keeps_decorators_so_the_parent_can_see_them():
    assert normalize_source(DECORATOR_SWAP, "f").text.count("@deco") == 1


def test_collections_anywhere_leave_an_honest_sample_traceable(sb):
    """The guard's gc callback runs at every collection, also one that starts inside the guard's own
    hook (a threshold of 1 collects at almost every allocation); gc.collect() is allowed."""
    src = (
        "import gc\ndef f(n):\n    gc.set_threshold(1, 1, 1)\n    xs = []\n    for i in range(n):\n"
        "        xs.append([i] * 3)\n    gc.collect()\n    return len(xs)\n"
    )
    out = trace(src, "300", sandbox=sb)
    assert out.ok, out.reason
    assert out.flow.output == 300
