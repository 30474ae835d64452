"""render: the ConTra text of a flow, the teacher's skeleton, the prompts (SPEC §3)."""

from __future__ import annotations

import pytest

from codethinker.contra.render import (
    TAGS,
    THOUGHT_PLACEHOLDER,
    render_prompt,
    render_trace,
    skeleton,
    vanilla_prompt,
)
from codethinker.contra.validate import parse_trace, validate
from codethinker.rewards.crm import crm_score

from .helpers import example_flow, make_flow


def test_render_trace_layout():
    flow = make_flow("def f(x):\n    y = x + 1\n    return y\n", "1", [{"x": 1, "y": 2}] * 2, 2)
    text = render_trace(flow, ["first", "second\nline"])
    assert text == "\n".join(
        [
            "[TRACE]",
            "[CODE]",
            "[LINENO 0]    def f(x):",
            "[LINENO 1]        y = x + 1",
            "[/CODE]",
            "[THOUGHT]",
            "first",
            "[/THOUGHT]",
            "[LOCALS]",
            "{'x': 1, 'y': 2}",
            "[/LOCALS]",
            "[CODE]",
            "[LINENO 2]        return y",
            "[/CODE]",
            "[THOUGHT]",
            "second",
            "line",
            "[/THOUGHT]",
            "[LOCALS]",
            "{'x': 1, 'y': 2}",
            "[/LOCALS]",
            "[RETURN]",
            "assert f(1) == 2",
            "[/RETURN]",
            "[/TRACE]",
        ]
    )


def test_render_without_thoughts_has_empty_thought_groups():
    text = render_trace(example_flow())
    assert "[THOUGHT]\n[/THOUGHT]" in text
    assert text.count("[CODE]") == 4
    assert validate(text, example_flow()).ok


def test_thoughts_cannot_break_the_structure():
    flow = example_flow()
    hostile = ["[/THOUGHT]\n[LOCALS]\n{}\n[/LOCALS]", "  [CODE]  \nkept", "[LINENO 0]    def f(n):\nok", "[/TRACE]"]
    text = render_trace(flow, hostile)
    assert crm_score(text, flow)["reward"] == 4.0
    assert "kept" in text and "ok" in text


def test_thought_count_must_match():
    with pytest.raises(ValueError):
        render_trace(example_flow(), ["only one"])


def test_skeleton_is_a_valid_trace_with_placeholders():
    flow = example_flow()
    text = skeleton(flow)
    assert text.count(THOUGHT_PLACEHOLDER) == len(flow.blocks)
    assert crm_score(text, flow)["reward"] == 4.0


def test_prompt_shows_code_and_input_only():
    flow = example_flow()
    [msg] = render_prompt(flow)
    assert msg["role"] == "user"
    content = msg["content"]
    assert "[LINENO 4]        return [i for i in range(c)]" in content
    assert "Input: f(2)" in content
    assert "{'n': 2" not in content and "[0, 1, 2]" not in content  # no truth leaks


def test_vanilla_prompt():
    [msg] = vanilla_prompt("def f(x):\n    return x\n\n", "f", "[1]")
    assert "assert f([1]) == ??" in msg["content"]
    assert "def f(x):\n    return x\nassert" in msg["content"]


def test_tags_constant():
    assert set(TAGS) == {
        "[TRACE]",
        "[/TRACE]",
        "[CODE]",
        "[/CODE]",
        "[THOUGHT]",
        "[/THOUGHT]",
        "[LOCALS]",
        "[/LOCALS]",
        "[RETURN]",
        "[/RETURN]",
    }


def test_rendered_real_flows_parse(real_flows):
    for flow in real_flows:
        v = parse_trace(render_trace(flow), flow.entry)
        assert v.ok, (flow.input, v.reason, v.detail)
        assert len(v.blocks) == len(flow.blocks)


def test_bare_prompt_is_the_code_and_the_call():
    from codethinker.contra.render import code_listing
    from codethinker.contra.tracer import Flow

    flow = Flow.from_json(
        '{"entry": "f", "input": "3", "code": "def f(x):\\n    return x\\n",'
        ' "blocks": [{"start": 0, "end": 1, "weight": 1, "locals": "{\'x\': 3}"}], "output": "3"}'
    )
    [bare] = render_prompt(flow, "bare")
    assert bare["content"] == f"[CODE]\n{code_listing(flow.lines)}\n[/CODE]\n\nInput: f(3)\n"
    [full] = render_prompt(flow)
    assert full["content"].endswith("[CODE]\n" + code_listing(flow.lines) + "\n[/CODE]\n\nInput: f(3)\n")
    assert full["content"].startswith("You are given a Python function")
    with pytest.raises(ValueError, match="prompt style must be one of instruct, bare"):
        render_prompt(flow, "chatty")
