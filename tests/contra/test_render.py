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
    assert bare["content"] == f"[CODE]\n{code_listing(flow.lines)}\n[/CODE]\n\nInput: f(3)\n{{'x': 3}}\n"
    [full] = render_prompt(flow)
    assert full["content"].endswith("[CODE]\n" + code_listing(flow.lines) + "\n[/CODE]\n\nInput: f(3)\n")
    assert full["content"].startswith("You are given a Python function")
    with pytest.raises(ValueError, match="prompt style must be one of instruct, bare"):
        render_prompt(flow, "chatty")


def _flow(code: str, input_text: str, entry: str = "f"):
    from codethinker.contra.tracer import Flow

    n = code.rstrip("\n").count("\n")
    block = {"start": 0, "end": n, "weight": 1, "locals": "{}"}
    return Flow.from_dict({"entry": entry, "input": input_text, "code": code, "blocks": [block], "output": "None"})


class TestEntryFrame:
    """entry_frame: the arguments bound to the parameters, as the bare prompt's LOCALS-style line."""

    @pytest.mark.parametrize(
        ("code", "call", "frame"),
        [
            ("def f(x):\n    return x\n", "3", "{'x': 3}"),
            ("def f(s, n):\n    return s\n", "'ab',  2", "{'s': 'ab', 'n': 2}"),
            ("def f(xs, k=0, s=1):\n    return k\n", "[1,2], k=3", "{'xs': [1, 2], 'k': 3}"),  # defaults unlisted
            ("def f(a, /, b, *, c):\n    return a\n", "1, c=(2,), b={3}", "{'a': 1, 'b': {3}, 'c': (2,)}"),
            ("def f(x):\n    return x\n", "", "{}"),  # missing argument: nothing to bind, the call fails at run time
        ],
    )
    def test_valid(self, code, call, frame):
        from codethinker.contra.render import entry_frame

        assert entry_frame(_flow(code, call)) == frame

    @pytest.mark.parametrize(
        ("code", "call"),
        [
            ("def f(*xs):\n    return xs\n", "1, 2"),  # *args
            ("def f(**kw):\n    return kw\n", "a=1"),  # **kwargs
            ("def f(x):\n    return x\n", "1, 2"),  # more arguments than parameters
            ("def f(x):\n    return x\n", "y=1"),  # unknown keyword
            ("def f(x):\n    return x\n", "1, x=2"),  # bound twice
            ("def f(a, /):\n    return a\n", "a=1"),  # positional-only by keyword
            ("def f(x):\n    return x\n", "len([])"),  # not a literal
            ("def f(x):\n    return x\n", "[1"),  # not Python
            ("def g(x):\n    return x\n", "1"),  # no def of the entry
            ("def g():\n    def f(x):\n        return x\n    return f\n", "1"),  # only a nested one
        ],
    )
    def test_invalid_gives_no_frame_and_the_prompt_keeps_the_call(self, code, call):
        from codethinker.contra.render import entry_frame

        flow = _flow(code, call)
        assert entry_frame(flow) is None
        [bare] = render_prompt(flow, "bare")
        assert bare["content"].endswith(f"\n[/CODE]\n\nInput: f({call})\n")

    def test_mixed_rows_each_get_their_own_frame(self):
        from codethinker.contra.render import entry_frame

        flows = [_flow("def f(x):\n    return x\n", "7"), _flow("def f(*x):\n    return x\n", "7")]
        assert [entry_frame(f) for f in flows] == ["{'x': 7}", None]

    def test_frame_is_the_locals_on_entry(self):
        """Property: for generated parameter lists and literal arguments, the frame parses to the dict
        ``locals()`` returns as the function's first statement, in its order."""
        from hypothesis import given, settings
        from hypothesis import strategies as st

        from codethinker.contra.render import entry_frame
        from codethinker.contra.values import parse_literal

        values = st.recursive(
            st.integers(-999, 999) | st.text("abc xyz'\"\\", max_size=5) | st.booleans() | st.none(),
            lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner),
            max_leaves=6,
        )

        @settings(max_examples=150, deadline=None)
        @given(st.lists(values, min_size=1, max_size=4), st.integers(0, 4), st.integers(0, 4))
        def check(args, n_kw, n_default):
            names = [f"p{i}" for i in range(len(args) + n_default)]
            sig = ", ".join(names[: len(args)] + [f"{n}=None" for n in names[len(args) :]])
            code = f"def f({sig}):\n    return locals()\n"
            cut = len(args) - min(n_kw, len(args))  # the last n_kw arguments passed by keyword
            pos, kw = args[:cut], list(zip(names[cut : len(args)], args[cut:], strict=True))
            call = ", ".join([repr(a) for a in pos] + [f"{k}={v!r}" for k, v in kw])
            env: dict = {}
            exec(code, env)  # literal values only, a generated def
            on_entry = eval(f"f({call})", env)
            frame = parse_literal(entry_frame(_flow(code, call)))
            assert list(frame.items()) == [(k, v) for k, v in on_entry.items() if k in names[: len(args)]]

        check()

    def test_bare_prompt_shows_the_frame_after_the_call(self):
        flow = _flow("def f(a, b):\n    return a\n", "[1, 2], 'x'")
        [bare] = render_prompt(flow, "bare")
        assert bare["content"].endswith("\n[/CODE]\n\nInput: f([1, 2], 'x')\n{'a': [1, 2], 'b': 'x'}\n")
        [full] = render_prompt(flow)
        assert "{'a'" not in full["content"]  # the instruction prompt of hub models is the paper's
