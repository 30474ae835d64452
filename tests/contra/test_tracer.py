"""tracer: ground-truth flows from real runs in the sandbox (SPEC §3), and the truth JSON."""

from __future__ import annotations

import json

import pytest

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow, TraceOutcome, trace, trace_many
from codethinker.contra.values import strict_equal
from codethinker.rewards.crm import crm_score


@pytest.fixture(scope="module")
def sb():
    from codethinker.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(timeout_s=2.0, workers=2)) as box:
        yield box


def ok(src: str, inp: str, sb, entry: str = "f") -> Flow:
    out = trace(src, inp, entry, sandbox=sb)
    assert isinstance(out, TraceOutcome)
    assert out.ok, out.reason
    assert out.reason is None
    assert out.flow is not None
    # every ground-truth flow renders to a trace that scores 4 against itself
    assert crm_score(render_trace(out.flow), out.flow)["reward"] == 4.0
    return out.flow


def spans_locals(flow: Flow) -> list[tuple[int, int, dict]]:
    return [(b.start, b.end, b.locals) for b in flow.blocks]


def test_straight_line(sb):
    flow = ok("def f(x):\n    y = x + 1\n    return y\n", "1", sb)
    assert spans_locals(flow) == [(0, 1, {"x": 1, "y": 2}), (2, 2, {"x": 1, "y": 2})]
    assert flow.output == 2 and flow.output_text == "2"
    assert flow.entry == "f" and flow.input == "1"
    assert flow.lines == ("def f(x):", "    y = x + 1", "    return y")
    assert flow.weights == [1, 1]
    assert flow.block_code(1) == ("    return y",)


def test_block_that_did_not_run_keeps_previous_locals(sb):
    src = (
        "def f(x):\n    y = 0\n    if x > 5:\n        y = 1\n    for i in []:\n        y = 2\n"
        "    z = y + 1\n    return z\n"
    )
    flow = ok(src, "1", sb)
    before = {"x": 1, "y": 0}
    assert spans_locals(flow) == [
        (0, 1, before),
        (2, 3, before),
        (4, 5, before),
        (6, 6, {"x": 1, "y": 0, "z": 1}),
        (7, 7, {"x": 1, "y": 0, "z": 1}),
    ]


def test_flow_ends_with_the_returning_block(sb):
    src = "def f(x):\n    y = 0\n    if x > 5:\n        return 9\n    z = y + 1\n    return z\n"
    flow = ok(src, "7", sb)
    assert [(b.start, b.end) for b in flow.blocks] == [(0, 1), (2, 3)]
    assert flow.output == 9
    flow = ok(src, "1", sb)
    assert [(b.start, b.end) for b in flow.blocks] == [(0, 1), (2, 3), (4, 4), (5, 5)]


def test_a_global_statement_as_first_block_keeps_the_entry_locals(sb):
    """``global`` emits no line event: the first line event lands in block 1, and block 0's exit
    (the entry locals) must still be recorded, or every LOCALS after it sits one block early."""
    src = "total = 0\ndef f(x):\n    global total\n    total = x + 1\n    y = total * 2\n    return y\n"
    flow = ok(src, "1", sb)
    assert spans_locals(flow) == [
        (0, 2, {"x": 1}),
        (3, 3, {"x": 1}),
        (4, 4, {"x": 1, "y": 4}),
        (5, 5, {"x": 1, "y": 4}),
    ]
    assert flow.output == 4


def test_a_bare_annotation_as_first_block_keeps_the_entry_locals(sb):
    flow = ok("def f(x):\n    total: int\n    total = x + 1\n    return total\n", "1", sb)
    assert spans_locals(flow) == [(0, 1, {"x": 1}), (2, 2, {"x": 1, "total": 2}), (3, 3, {"x": 1, "total": 2})]


def test_skipped_blocks_before_the_first_line_event_and_between_later_ones(sb):
    src = "def f(x):\n    global a\n    global b\n    y = x\n    if y > 5:\n        y = 0\n    return y\n"
    flow = ok(src, "1", sb)
    assert [b.locals for b in flow.blocks] == [{"x": 1}, {"x": 1}, {"x": 1, "y": 1}, {"x": 1, "y": 1}, {"x": 1, "y": 1}]


@pytest.mark.needs_shared
def test_cruxeval_sample_280_has_five_blocks_and_its_own_output(sb, crux_rows):
    """CRUXEval's sample_280 starts with ``global g, field``: five blocks, the last holding the return."""
    from codethinker.contra.values import parse_literal

    row = next(r for r in crux_rows if r["id"] == "sample_280")
    flow = ok(row["code"], row["input"], sb)
    assert len(flow.blocks) == 5
    text = row["input"].strip()[1:-1]
    assert flow.blocks[0].locals == {"text": text}
    assert flow.blocks[1].locals == {"text": text}  # field is a global: no local changed
    assert flow.blocks[3].locals == {"text": text.replace("1", "i")}
    assert strict_equal(flow.output, parse_literal(row["output"]))
    assert flow.blocks[-1].locals == flow.blocks[3].locals


def test_return_inside_a_loop(sb):
    src = "def f(xs):\n    for x in xs:\n        if x > 2:\n            return x\n    return -1\n"
    flow = ok(src, "[1, 5, 7]", sb)
    assert spans_locals(flow) == [(0, 3, {"xs": [1, 5, 7], "x": 5})]
    assert flow.output == 5


def test_locals_at_return_of_a_loop_block(sb):
    flow = ok("def f(x):\n    for i in range(3):\n        x += i\n    return x\n", "0", sb)
    assert spans_locals(flow) == [(0, 2, {"x": 3, "i": 2}), (3, 3, {"x": 3, "i": 2})]


def test_recursion_traces_only_the_outermost_call(sb):
    src = "def f(n):\n    if n <= 1:\n        return 1\n    r = n * f(n - 1)\n    return r\n"
    flow = ok(src, "4", sb)
    assert spans_locals(flow) == [(0, 2, {"n": 4}), (3, 3, {"n": 4, "r": 24}), (4, 4, {"n": 4, "r": 24})]


def test_helper_calls_run_inside_a_block(sb):
    src = (
        "def f(x):\n    y = g(x)\n    w = g(y)\n    return w\n"
        "def g(a):\n    b = a * 2\n    if b > 100:\n        b = 0\n    return b\n"
    )
    flow = ok(src, "3", sb)
    # the helper moved above f; its lines join f's first block and its locals never appear
    assert flow.lines[0] == "def g(a):"
    assert spans_locals(flow) == [
        (0, 6, {"x": 3, "y": 6}),
        (7, 7, {"x": 3, "y": 6, "w": 12}),
        (8, 8, {"x": 3, "y": 6, "w": 12}),
    ]
    assert flow.weights == [1, 1, 1]


def test_nested_function_and_comprehension_frames_are_not_traced(sb):
    src = (
        "def f(x):\n    def g(v):\n        t = v + 1\n        return t\n"
        "    y = [g(i) for i in range(x)]\n    return y\n"
    )
    flow = ok(src, "2", sb)
    assert [b.locals for b in flow.blocks][1:] == [{"x": 2, "y": [1, 2]}, {"x": 2, "y": [1, 2]}]
    assert "g" not in flow.blocks[0].locals  # a function has no literal form
    assert flow.weights == [1, 2, 1]


def test_collections_are_canonicalized(sb):
    src = (
        "from collections import Counter, OrderedDict, defaultdict, deque\n"
        "def f(s):\n"
        "    c = Counter(s)\n"
        "    q = deque(s)\n"
        "    d = defaultdict(int)\n"
        "    d['a'] += 1\n"
        "    o = OrderedDict(b=1)\n"
        "    return c, q, d, o\n"
    )
    flow = ok(src, "'aab'", sb)
    last = flow.blocks[-1].locals
    assert last == {"s": "aab", "c": {"a": 2, "b": 1}, "q": ["a", "a", "b"], "d": {"a": 1}, "o": {"b": 1}}
    assert all(type(last[k]) is t for k, t in [("c", dict), ("q", list), ("d", dict), ("o", dict)])
    assert flow.output == ({"a": 2, "b": 1}, ["a", "a", "b"], {"a": 1}, {"b": 1})
    assert flow.output_text == "({'a': 2, 'b': 1}, ['a', 'a', 'b'], {'a': 1}, {'b': 1})"
    d = json.loads(flow.to_json())
    assert not any(name in json.dumps([d["blocks"], d["output"]]) for name in ("Counter", "deque", "default"))


def test_variables_without_literal_form_are_left_out(sb):
    src = "def f(x):\n    g = lambda y: y\n    it = iter([1])\n    h = len\n    o = object()\n    return g(x)\n"
    flow = ok(src, "1", sb)
    assert all(b.locals == {"x": 1} for b in flow.blocks)


def test_cyclic_value_is_left_out(sb):
    flow = ok("def f(x):\n    l = []\n    l.append(l)\n    return 1\n", "1", sb)
    assert [b.locals for b in flow.blocks] == [{"x": 1, "l": []}, {"x": 1}, {"x": 1}]


def test_huge_int_local_is_left_out(sb):
    flow = ok("def f(x):\n    y = 10 ** 5000\n    return 1\n", "1", sb)
    assert flow.blocks[0].locals == {"x": 1}


@pytest.mark.parametrize(
    ("src", "inp", "reason"),
    [
        ("def f(x):\n    return iter([x])\n", "1", "output has no literal form"),
        ("def f(x):\n    return (i for i in [x])\n", "1", "output has no literal form"),
        ("def f(x):\n    return float('nan')\n", "1", "output has no literal form"),
        ("def f(x):\n    return object()\n", "1", "output has no literal form"),
        ("def f(x):\n    return 10 ** 5000\n", "1", "output has no literal form"),
        ("def f(x):\n    return 1 / x\n", "0", "ZeroDivisionError"),
        ("def f(x):\n    raise KeyError('k')\n", "0", "KeyError"),
        ("def f(x):\n    return f(x)\n", "0", "RecursionError"),
        ("def f(x):\n    return x\n", "undefined_name", "NameError"),
        ("def f(x):\n    return x\n", "1, 2", "TypeError"),
        ("def f(x):\n    return x\n", "(1", "bad program or input"),
        ("def f(x):\n    return x\n", "1)", "bad program or input"),
        ("def g(x):\n    return x\n", "1", "bad program or input"),
        ("def f(x:\n", "1", "bad program or input"),
    ],
)
def test_untraceable_samples_give_a_reason(sb, src, inp, reason):
    out = trace(src, inp, sandbox=sb)
    assert not out.ok and out.flow is None
    assert reason in out.reason


def test_timeout_gives_a_reason():
    from codethinker.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(timeout_s=0.5, workers=1)) as box:
        out = trace("def f(x):\n    while True:\n        x += 1\n", "0", sandbox=box)
    assert not out.ok
    assert out.reason == "timeout"


def test_expression_inputs_are_evaluated_in_the_sandbox(sb):
    flow = ok("def f(s):\n    return s.lower()\n", "''.join(['A'] * 20)", sb)
    assert flow.blocks[0].locals == {"s": "A" * 20}
    assert flow.output == "a" * 20
    assert flow.input == "''.join(['A'] * 20)"  # the assertion keeps the benchmark's own text
    assert render_trace(flow).split("\n")[-3] == "assert f(''.join(['A'] * 20)) == 'aaaaaaaaaaaaaaaaaaaa'"


def test_expression_input_with_keyword(sb):
    flow = ok("def f(a, b):\n    return a + b\n", "list(range(3)), b=[9]", sb)
    assert flow.output == [0, 1, 2, 9]


def test_keyword_and_positional_inputs(sb):
    flow = ok(
        "def f(nums, target):\n    s = nums[0] + nums[1]\n    return s == target\n", "nums = [2,7], target = 9", sb
    )
    assert flow.blocks[0].locals == {"nums": [2, 7], "target": 9, "s": 9}
    assert flow.output is True
    assert render_trace(flow).split("\n")[-3] == "assert f(nums = [2,7], target = 9) == True"
    flow = ok("def f(*args, **kw):\n    return args, kw\n", "1, (2, ), a=3", sb)
    assert flow.output == ((1, (2,)), {"a": 3})


def test_other_entry_name(sb):
    src = "def has_close_elements(xs, t):\n    d = abs(xs[0] - xs[1])\n    return d < t\n"
    flow = ok(src, "[1.0, 1.05], 0.1", sb, entry="has_close_elements")
    assert flow.entry == "has_close_elements"
    assert render_trace(flow).split("\n")[-3] == "assert has_close_elements([1.0, 1.05], 0.1) == True"


def test_multiline_literal_input(sb):
    flow = ok("def f(x):\n    return x\n", "[1,\n 2]", sb)
    assert flow.output == [1, 2]


def test_code_is_run_isolated(sb, tmp_path):
    sentinel = tmp_path / "sentinel"
    src = (
        f"import os\ndef f(x):\n    os.system('touch {sentinel}')\n    open('{sentinel}', 'w').close()\n    return x\n"
    )
    trace(src, "1", sandbox=sb)
    assert not sentinel.exists()


def test_trace_many_keeps_order_and_mixes_failures():
    items = [
        ("def f(x):\n    return x * 2\n", "1", "f"),
        ("def f(x):\n    return 1 / x\n", "0", "f"),
        ("def f(x):\n    return x\n", "(", "f"),
        ("def g(x):\n    return [x]\n", "'a'", "g"),
    ]
    outs = trace_many(items)
    assert len(outs) == 4
    assert outs[0].flow.output == 2
    assert "ZeroDivisionError" in outs[1].reason
    assert "bad program or input" in outs[2].reason
    assert outs[3].flow.output == ["a"]
    assert trace_many([]) == []


def test_truth_json_round_trip(sb):
    src = "def f(d):\n    s = {1, 2}\n    t = (1.5, None, b'x')\n    return {True: s, 1.0: t}\n"
    flow = ok(src, "{'k': [1]}", sb)
    text = flow.to_json()
    d = json.loads(text)
    assert set(d) == {"version", "entry", "input", "code", "blocks", "output"}
    assert d["version"] == 1 and d["code"] == "\n".join(flow.lines) + "\n"
    assert set(d["blocks"][0]) == {"start", "end", "weight", "locals"}
    back = Flow.from_json(text)
    assert back == Flow.from_dict(d)
    assert back.lines == flow.lines and back.entry == flow.entry and back.input == flow.input
    assert strict_equal(back.output, flow.output) and back.output_text == flow.output_text
    for a, b in zip(back.blocks, flow.blocks, strict=True):
        assert (a.start, a.end, a.weight, a.locals_text) == (b.start, b.end, b.weight, b.locals_text)
        assert strict_equal(a.locals, b.locals)
    assert crm_score(render_trace(flow), back)["reward"] == 4.0


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        "{}",
        '{"entry": "f", "input": "1", "code": "def f(x):\\n    return x\\n", "blocks": [], "output": "1"}',
        '{"entry": "f", "input": "1", "code": "def f(x):\\n    return x\\n", "output": "1",'
        ' "blocks": [{"start": 1, "end": 1, "weight": 1, "locals": "{}"}]}',
        '{"entry": "f", "input": "1", "code": "def f(x):\\n    return x\\n", "output": "f()",'
        ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{}"}]}',
        '{"entry": "f", "input": "1", "code": "def f(x):\\n    return x\\n", "output": "1",'
        ' "blocks": [{"start": "a", "end": 1, "weight": 1, "locals": "{}"}]}',
        '{"entry": "f", "input": "1", "code": "def f(x):\\n    return x\\n", "output": "1",'
        ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": 5}]}',
    ],
)
def test_bad_truth_json_is_a_value_error(text):
    with pytest.raises(ValueError):
        Flow.from_json(text)


def test_truth_json_with_non_string_code_is_a_value_error():
    text = '{"entry": "f", "input": "1", "code": 123, "output": "1", "blocks": []}'
    with pytest.raises(ValueError):
        Flow.from_json(text)


def test_a_set_in_the_truth_is_written_in_one_order(sb):
    """Regression: LeetCode's valid-parentheses came back as {'[]', '()', '{}'} in one run and
    {'()', '[]', '{}'} in the next (the parent rendered it in its own hash order)."""
    src = "def f(s):\n    d = {'()', '[]', '{}'}\n    return d\n"
    flows = [ok(src, "'()'", sb) for _ in range(3)]
    texts = {f.to_json() for f in flows}
    assert len(texts) == 1
    assert flows[0].blocks[0].locals_text == "{'s': '()', 'd': {'()', '[]', '{}'}}"
