"""scripts/copy_accuracy.py: each character of a real rendered trace is put in the right part."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow

_spec = importlib.util.spec_from_file_location(
    "copy_accuracy", Path(__file__).resolve().parents[2] / "scripts" / "copy_accuracy.py"
)
copy_accuracy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(copy_accuracy)

FLOW = Flow.from_json(
    '{"entry": "f", "input": "13", "code": "def f(x):\\n    y = x + 2\\n    return y\\n",'
    ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{\'x\': 13, \'y\': 15}"},'
    ' {"start": 2, "end": 2, "weight": 1, "locals": "{\'x\': 13, \'y\': 15}"}], "output": "15"}'
)


def _parts_of(trace: str, needle: str, nth: int = 0) -> set[str]:
    parts, start = copy_accuracy.char_parts(trace), -1
    for _ in range(nth + 1):
        start = trace.index(needle, start + 1)
    return set(parts[start : start + len(needle)])


def test_each_part_of_a_rendered_trace():
    trace = render_trace(FLOW)
    assert _parts_of(trace, "y = x + 2") == {"code"}
    assert _parts_of(trace, "{'x': 13, 'y': 15}") == {"locals"}
    assert _parts_of(trace, "{'x': 13, 'y': 15}", nth=1) == {"locals"}
    assert _parts_of(trace, "f(13)") == {"ret_input"}
    assert _parts_of(trace, "== ") == {"other"}
    assert _parts_of(trace, "15\n[/RETURN]") == {"ret_output", "other"}
    assert _parts_of(trace, "[LOCALS]") == {"other"}


def test_token_kinds():
    assert [copy_accuracy.token_kind(t) for t in ("7", "Ġcount", "Ġ=", "'", "Ġ")] == [
        "digit",
        "alpha",
        "punct",
        "punct",
        "punct",
    ]
