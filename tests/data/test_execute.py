"""exec_filter: every (function, input) through the sandbox and the tracer; drops counted."""

from __future__ import annotations

import functools

import pytest

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow, trace_many
from codethinker.data.execute import EXEC_REASONS, classify, exec_filter
from codethinker.sandbox import SandboxConfig

CODE = {
    "ok": "def f(nums):\n    total = 0\n    for x in nums:\n        total += x\n    return total\n",
    "none": "def f(nums):\n    nums.sort()\n",
    "obj": "def f(x):\n    return object()\n",
    "loop": "def f(x):\n    while True:\n        x += 1\n    return x\n",
    "long": "def f(n):\n    big = list(range(n))\n    return len(big)\n",
}


def rec(name, inputs):
    return {"task_id": name, "entry": "f", "code": CODE[name], "inputs": inputs, "difficulty": "Easy"}


def test_classify():
    assert classify("timeout") == ("timeout", None)
    assert classify("error: ZeroDivisionError: division by zero") == ("runtime_error", "ZeroDivisionError")
    assert classify("output has no literal form (object has no literal form)") == ("output_not_literal", None)
    assert classify("bad program or input: input arguments must be literals: x") == ("input_not_literal", None)
    assert classify("tracer saw 3 block exits for 2 blocks")[0] == "untraceable"
    assert classify("")[0] == "untraceable"


@pytest.mark.slow
def test_exec_filter_with_sandbox():
    tracer = functools.partial(trace_many, sandbox_config=SandboxConfig(timeout_s=1.0))
    records = [
        rec("ok", ["[1, 2, 3]", "[]", "[1, 'a']", "'abc'"]),
        rec("none", ["[3, 1]"]),
        rec("obj", ["1"]),
        rec("loop", ["0"]),
        rec("long", ["3", "400"]),
    ]
    samples, counts = exec_filter(records, tracer=tracer, render=render_trace, max_trace_chars=1500)
    assert [s["id"] for s in samples] == ["ok/0", "ok/1", "long/0"]
    assert counts["dropped"] == {
        "timeout": 1,
        "runtime_error": 2,
        "output_not_literal": 1,
        "output_none": 1,
        "trace_too_long": 1,
    }
    assert set(counts["dropped"]) <= set(EXEC_REASONS)
    assert counts["error_types"] == {"TypeError": 2}
    assert counts["pairs_in"] == 9 == counts["samples"] + sum(counts["dropped"].values())
    s = samples[0]
    assert s["output"] == "6" and s["input"] == "[1, 2, 3]"
    flow = Flow.from_json(s["truth"])
    assert flow.output == 6 and flow.blocks[-1].locals["total"] == 6
    assert "assert f([1, 2, 3]) == 6" in render_trace(flow)
    kept_none, _ = exec_filter([rec("none", ["[3, 1]"])], tracer=tracer, render=render_trace, keep_none=True)
    assert kept_none[0]["output"] == "None"


def test_tracer_count_mismatch_is_an_error():
    with pytest.raises(RuntimeError, match="outcomes"):
        exec_filter([rec("ok", ["[1]"])], tracer=lambda items: [], render=render_trace)
