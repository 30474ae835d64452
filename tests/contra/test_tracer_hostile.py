"""tracer under attack: a sample that touches the tracer's hooks is untraceable, never a false truth;
a forged runner result of the wrong shape costs only its own sample."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.contra import _guard
from codethinker.contra.blocks import split_blocks
from codethinker.contra.normalize import normalize_source
from codethinker.contra.tracer import _build, runner_result_problem, trace, trace_many

HOSTILE = Path(__file__).parent.parent / "hostile"

# f's true flow on input 1: blocks (0-1) y = 1, (2-2) y = y + 10, (3-3) return y  -> exits y=1, y=11, y=11
TAIL = "    y = y + 10\n    return y\n"


def body(attack: str, prelude: str = "") -> str:
    """A program whose f runs ``attack`` (indented lines) in its first block."""
    return f"{prelude}def f(x):\n    y = x\n{attack}{TAIL}"


ATTACKS = {
    "settrace_none": body("    sys.settrace(None)\n", "import sys\n"),
    "settrace_other": body("    sys.settrace(lambda *a: None)\n", "import sys\n"),
    "settrace_swallowed": body(
        "    try:\n        sys.settrace(None)\n    except BaseException:\n        pass\n", "import sys\n"
    ),
    "setprofile": body("    sys.setprofile(lambda *a: None)\n", "import sys\n"),
    "getframe_f_trace": body("    sys._getframe().f_trace = None\n", "import sys\n"),
    "currentframe_trace_lines": body("    inspect.currentframe().f_trace_lines = False\n", "import inspect\n"),
    "traceback_frame": body(
        "    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
        "        e.__traceback__.tb_frame.f_trace_lines = False\n"
    ),
    "generator_frame": body("    g = (i for i in [1])\n    g.gi_frame.f_trace = None\n"),
    "gettrace_closure": body(
        "    t = sys.gettrace()\n"
        "    for c in (t.__closure__ or ()):\n"
        "        v = c.cell_contents\n"
        "        if callable(v) and getattr(v, '__closure__', None):\n"
        "            for d in v.__closure__:\n"
        "                if type(d.cell_contents) is list:\n"
        "                    for e in d.cell_contents:\n"
        "                        e['y'] = 999\n",
        "import sys\n",
    ),
    "gc_referrers": body(
        "    for o in gc.get_objects():\n"
        "        if type(o) is list and o and type(o[0]) is dict and 'y' in o[0]:\n"
        "            o[0]['y'] = 999\n",
        "import gc\n",
    ),
    "profile_at_module_level": body(
        "",
        "import sys\n"
        "def p(frame, event, arg):\n"
        "    if event == 'call' and frame.f_code.co_name == 'f':\n"
        "        frame.f_trace_lines = False\n"
        "sys.setprofile(p)\n",
    ),
    "signal_handler_frame": body(
        "    signal.signal(signal.SIGUSR1, h)\n    os.kill(os.getpid(), signal.SIGUSR1)\n",
        "import os, signal\ndef h(sig, frame):\n    frame.f_trace_lines = False\n",
    ),
    "patch_tracer_snapshot": body(
        "",
        "import codethinker.contra.tracer as t\nt._snapshot = lambda loc, *a, **k: {'x': 1, 'y': 999}\n",
    ),
    "patch_and_restore_canonicalize": body(
        "    v.canonicalize = lambda value, *a: 999 if value == 1 else keep(value, *a)\n"
        "    y = y\n"
        "    v.canonicalize = keep\n",
        "import codethinker.contra.values as v\nkeep = v.canonicalize\n",
    ),
    "audit_hook_at_module_level": body("", "import sys\nsys.addaudithook(lambda event, args: None)\n"),
    "forged_guard_end": body('    sys.audit("codethinker.tracer.guard.end")\n', "import sys\n"),
    "raw_fd_write": body("    os.write(1, b'x')\n", "import os\n"),
    # the guard's rules live in their own module since the split: still the tracer's own code to a sample
    "call_guard_rules": body("    r.denied_event('open', ())\n", "import codethinker.contra._guard_rules as r\n"),
}


@pytest.fixture(scope="module")
def sb():
    from codethinker.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(timeout_s=2.0, workers=1)) as box:
        yield box


def test_the_clean_program_traces(sb):
    out = trace(body(""), "1", sandbox=sb)
    assert out.ok, out.reason
    assert [b.locals for b in out.flow.blocks] == [{"x": 1, "y": 1}, {"x": 1, "y": 11}, {"x": 1, "y": 11}]


TRUE_FLOW = [{"x": 1, "y": 1}, {"x": 1, "y": 11}, {"x": 1, "y": 11}]
# the guard is installed in the job's process before the sample's module-level code runs, so a
# patch made there is caught by the guard's module check (or ignored: the runner's bound defaults)
MAY_GIVE_THE_TRUE_FLOW = {"patch_tracer_snapshot"}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_tampering_is_untraceable_and_never_a_truth(sb, name):
    out = trace(ATTACKS[name], "1", sandbox=sb)
    if name in MAY_GIVE_THE_TRUE_FLOW and out.ok:
        assert [b.locals for b in out.flow.blocks] == TRUE_FLOW and out.flow.output == 11
    else:
        assert not out.ok, f"{name} gave a truth: {[b.locals for b in out.flow.blocks]} -> {out.flow.output}"
        assert "tamper" in out.reason, out.reason
    # the next sample in the same pool traces as before
    clean = trace(body(""), "1", sandbox=sb)
    assert clean.ok and clean.flow.blocks[1].locals == {"x": 1, "y": 11}


TRACER_CORPUS = sorted(HOSTILE.glob("t_*.py"))


def test_the_tracer_corpus_is_large_enough():
    assert len(TRACER_CORPUS) >= 14


@pytest.mark.parametrize("path", TRACER_CORPUS, ids=[p.stem for p in TRACER_CORPUS])
def test_hostile_corpus_tracer_program_is_untraceable(sb, path):
    """Each program of tests/hostile/t_*.py tries to make the tracer record a false truth (its header
    says how); it ends untraceable, and the next sample in the same pool traces as before."""
    out = trace(path.read_text(), "1", sandbox=sb)
    assert not out.ok, f"{path.name} gave a truth: {[b.locals for b in out.flow.blocks]} -> {out.flow.output}"
    assert "tamper" in out.reason, out.reason
    clean = trace(body(""), "1", sandbox=sb)
    assert clean.ok and [b.locals for b in clean.flow.blocks] == TRUE_FLOW


def test_ordinary_frame_free_code_still_traces(sb):
    src = (
        "import collections, functools, re\n"
        "def f(s):\n    c = collections.Counter(s)\n    try:\n        int(s)\n    except ValueError as e:\n"
        "        m = str(e)[:7]\n    w = re.findall('[a-z]', s)\n    g = sorted(x for x in w)\n"
        "    r = functools.reduce(lambda a, b: a + b, g)\n    return r, c.most_common(1), m\n"
    )
    out = trace(src, "'bab'", sandbox=sb)
    assert out.ok, out.reason
    assert out.flow.output == ("abb", [("b", 2)], "invalid")


def test_the_parent_never_gets_the_hook(sb):
    trace(body(""), "1", sandbox=sb)
    trace_many([(body(""), "1", "f")])
    assert not _guard.installed()


@pytest.mark.parametrize(
    ("event", "args", "denied"),
    [
        ("sys.settrace", (), True),
        ("sys._getframe", (None,), True),
        ("object.__getattr__", (None, "tb_frame"), True),
        ("object.__getattr__", (None, "f_code"), False),
        ("object.__setattr__", (None, "__code__", None), True),
        ("ctypes.dlopen", ("x",), True),
        ("open", (3, "wb", 0), True),
        ("open", ("/tmp/x", "r", 0), False),
        ("builtins.id", (1,), False),
        ("exec", (None,), False),
    ],
)
def test_denied_event(event, args, denied):
    assert (_guard.denied_event(event, args) is not None) is denied


def test_denied_call():
    import os
    import sys

    assert _guard.denied_call(sys.gettrace) and _guard.denied_call(os.write)
    assert _guard.denied_call(len) is None and _guard.denied_call([].append) is None


# --------------------------------------------------------------------------- forged result frames
SPECS = split_blocks(normalize_source(body(""), "f"))
PROG = normalize_source(body(""), "f")


def result(value, status="ok"):
    return SimpleNamespace(status=status, value=value, error_type=None, error_message=None)


GOOD = {"value": 11, "exits": [{"x": 1, "y": 1}, {"x": 1, "y": 11}, {"x": 1, "y": 11}]}


def _containers_of(inner: st.SearchStrategy) -> st.SearchStrategy:
    lists = st.lists(inner, max_size=4)
    return lists | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=4)


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | st.binary(max_size=5),
    _containers_of,
    max_leaves=12,
)
locals_dict = st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers() | st.text(max_size=4), max_size=3)


@settings(max_examples=300, deadline=None)
@given(plain)
def test_any_decoded_value_gives_an_outcome_and_never_raises(value):
    out = _build(PROG, SPECS, "1", result(value))
    assert out.ok == (runner_result_problem(value, len(SPECS)) is None and out.flow is not None)
    if not out.ok:
        assert out.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(locals_dict, min_size=3, max_size=3), st.integers() | st.text(max_size=5))
def test_valid_shapes_pass(exits, value):
    assert runner_result_problem({"value": value, "exits": exits}, 3) is None
    out = _build(PROG, SPECS, "1", result({"value": value, "exits": exits}))
    assert out.ok and [b.locals for b in out.flow.blocks] == exits


@pytest.mark.parametrize("n", [1, 2])
def test_a_truncated_flow_is_untraceable(n):
    """f returns only in its last block: a result of fewer exits (what tracing a wrapper gave) is
    refused by the parent, whatever the sample's process sent."""
    out = _build(PROG, SPECS, "1", result({"value": 11, "exits": GOOD["exits"][:n]}))
    assert not out.ok and "cannot return" in out.reason


@pytest.mark.parametrize(
    "value",
    [
        1,
        None,
        "exits",
        [GOOD],
        {"value": 1},
        {"exits": []},
        {"value": 1, "exits": 1},
        {"value": 1, "exits": {"a": 1}},
        {"value": 1, "exits": []},
        {"value": 1, "exits": [1]},
        {"value": 1, "exits": [[("x", 1)]]},
        {"value": 1, "exits": [{1: 2}]},
        {"value": 1, "exits": [{"not a name": 2}]},
        {"value": 1, "exits": [{}] * 4},
        {"value": 1, "exits": [{"x": 1}], "extra": 0},
        {"value": {1, 2.5, "s"}, "exits": [{"x": bytearray(b"x")}]},
    ],
)
def test_hostile_shapes_are_that_samples_error(value):
    out = _build(PROG, SPECS, "1", result(value))
    assert not out.ok and out.reason


def test_a_forged_frame_keeps_the_rest_of_the_batch():
    forged = {"status": "ok", "value": 1}  # what a compromised child sent, as decoded
    results = [result(GOOD), result(forged["value"]), result(GOOD)]
    outs = [_build(PROG, SPECS, "1", r) for r in results]
    assert [o.ok for o in outs] == [True, False, True]
    assert "malformed runner result" in outs[1].reason
    assert outs[0].flow.output == outs[2].flow.output == 11


FORGE_RESULT_FRAME = """
import os, struct, sys
def f(x):
    y = x
    try:
        sys.gettrace()  # refused: CPython then drops the guard's profile function
    except BaseException:
        pass
    from codethinker.sandbox import protocol
    data = protocol.encode({"status": "ok", "value": {"value": 999, "exits": [{"x": 1, "y": 999}] * 2},
                         "stdout": "", "stderr": "", "duration_s": 0.0})
    for fd in range(3, 40):
        try:
            if (os.fstat(fd).st_mode & 0o170000) == 0o010000:  # a pipe: the result pipe among them
                os.write(fd, struct.pack("<Q", len(data)) + data)
        except OSError:
            pass
    os._exit(0)
"""


MODULE_LEVEL_FORGE = """
import os, struct
from codethinker.sandbox import protocol
data = protocol.encode({"status": "ok", "value": {"value": 999, "exits": [{"x": 1, "y": 999}] * 2},
                     "stdout": "", "stderr": "", "duration_s": 0.0})
for fd in range(3, 40):
    try:
        if (os.fstat(fd).st_mode & 0o170000) == 0o010000:
            os.write(fd, struct.pack("<Q", len(data)) + data)
    except OSError:
        pass
os._exit(0)
def f(x):
    y = x
    return y
"""
READ_OWN_MEMORY = body("    open('/proc/self/mem', 'rb')\n")
READ_OWN_MEMORY_BY_LINK = body("    os.symlink('/proc/self/mem', 'm')\n    open('m', 'rb')\n", "import os\n")
USE_CTYPES = body("", "import ctypes\nctypes.string_at(id(0), 8)\n")


@pytest.mark.parametrize("src", [FORGE_RESULT_FRAME, MODULE_LEVEL_FORGE], ids=["in_f", "module_level"])
def test_a_sample_cannot_write_its_own_truth_to_the_result_pipe(sb, src):
    """A trace job's sample holds its result pipe; a frame it writes itself would lack the job's key,
    which the worker keeps where the armed guard lets no sample code reach (frames, gc, ctypes,
    /proc/self/mem), and the write itself is refused: untraceable, never a truth."""
    out = trace(src, "1", sandbox=sb)
    assert not out.ok, [b.locals for b in out.flow.blocks]
    assert "tamper" in out.reason and "os.write" in out.reason, out.reason


@pytest.mark.parametrize("src", [READ_OWN_MEMORY, READ_OWN_MEMORY_BY_LINK, USE_CTYPES], ids=["mem", "link", "ctypes"])
def test_the_armed_guard_refuses_memory_access_also_at_module_level(sb, src):
    out = trace(src, "1", sandbox=sb)
    assert not out.ok
    assert "tamper" in out.reason, out.reason
