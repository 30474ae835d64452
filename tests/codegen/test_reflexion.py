"""ReflexiCoder's response format: render, strict parse, every reason, hostile inputs, properties."""

from __future__ import annotations

import doctest
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.codegen import reflexion
from codethinker.codegen.reflexion import REASONS, Trajectory, parse_response, render_response

THINK = "<think>\nplan\n</think>\n"
A0 = "<answer>\n```python\nx = 0\n```\n</answer>\n"
R1 = "<reflection>\nSTATUS: BUG_DETECTED\nx must be 1\n</reflection>\n"
A1 = "<answer>\n```python\nx = 1\n```\n</answer>"
GOOD = THINK + A0 + R1 + A1


def reason(text: str) -> str | None:
    return parse_response(text).reason


class TestValid:
    def test_one_cycle(self):
        t = parse_response(GOOD)
        assert t == Trajectory(True, None, "plan", ("x = 0\n", "x = 1\n"), ("STATUS: BUG_DETECTED\nx must be 1",))
        assert t.cycles == 1 and t.statuses == ("BUG_DETECTED",)

    def test_three_cycles_in_order(self):
        text = render_response("p", ["a = 0", "a = 1", "a = 2", "a = 3"], ["r1", "STATUS: OPTIMIZATION_ONLY\nr2", "r3"])
        t = parse_response(text)
        assert t.ok and t.cycles == 3
        assert t.programs == ("a = 0\n", "a = 1\n", "a = 2\n", "a = 3\n")
        assert t.statuses == (None, "OPTIMIZATION_ONLY", None)

    def test_whitespace_around_and_between_sections(self):
        spaced = "\n\n  " + GOOD.replace("\n<", "\n\n \t<") + "\n\n"
        assert parse_response(spaced).programs == ("x = 0\n", "x = 1\n")
        assert parse_response(GOOD.replace("\n", "\r\n")).ok

    def test_prose_around_the_block_in_an_answer(self):
        text = GOOD.replace("<answer>\n```python\nx = 1", "<answer>\nFixed:\n```python\nx = 1")
        assert parse_response(text).programs[1] == "x = 1\n"

    def test_program_is_the_last_python_block(self):
        two = "<answer>\n```python\nx = 1\n```\nbetter:\n```py\nx = 2\n```\n</answer>"
        assert parse_response(THINK + A0 + R1 + two).programs[1] == "x = 2\n"

    def test_unicode(self):
        text = render_response("π ≈ 3.14 — 思考 🚀", ["s = 'ü'", "s = '漢字'"], ["STATUS: BUG_DETECTED\n全角"])
        t = parse_response(text)
        assert t.ok and t.think == "π ≈ 3.14 — 思考 🚀" and t.programs[1] == "s = '漢字'\n"

    def test_render_needs_one_more_program_than_reflections(self):
        with pytest.raises(ValueError, match="2 programs need 1 reflections, got 0"):
            render_response("p", ["a", "b"], [])

    def test_doctests(self):
        assert doctest.testmod(reflexion).failed == 0


class TestBroken:
    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ("", "empty"),
            (" \n\t ", "empty"),
            ("no tags at all", "text_outside_tags"),
            ("Sure! " + GOOD, "text_outside_tags"),
            (GOOD + "\nthanks", "text_outside_tags"),
            (THINK + "between" + A0 + R1 + A1, "text_outside_tags"),
            (GOOD.replace("<answer>", "<Answer>", 1), "malformed_tag"),
            (GOOD.replace("</think>", "</ think>"), "malformed_tag"),
            (GOOD + "<answer/>", "malformed_tag"),
            (A0 + R1 + A1, "no_think"),
            (THINK + THINK + A0 + R1 + A1, "bad_order"),
            (THINK + A0 + A1, "bad_order"),
            (THINK + A0 + R1 + R1 + A1, "bad_order"),
            (THINK + R1 + A1, "bad_order"),
            (THINK, "no_answer"),
            (THINK + A0, "no_reflection"),
            (THINK + A0 + R1, "no_revised_answer"),
            (THINK + A0 + R1 + A1 + R1, "no_revised_answer"),
            ("<think>a<think>b</think></think>" + A0 + R1 + A1, "nested_tag"),
            (THINK + "<answer>```python\nx=1\n```<reflection>r</reflection></answer>" + R1 + A1, "nested_tag"),
            ("</think>" + GOOD, "stray_close_tag"),
            (GOOD + "</answer>", "stray_close_tag"),
            ("<think>plan</answer>" + A0 + R1 + A1, "mismatched_tag"),
            (GOOD[:-9], "unclosed_tag"),
            ("<think> \n </think>" + A0 + R1 + A1, "empty_section"),
            (THINK + A0 + "<reflection></reflection>" + A1, "empty_section"),
            (THINK + A0 + R1 + "<answer>\n</answer>", "empty_section"),
            (THINK + A0 + R1 + "<answer>x = 1</answer>", "no_code"),
            (THINK + A0 + R1 + "<answer>```\nx = 1\n```</answer>", "no_code"),
            (THINK + A0 + R1 + "<answer>```js\nx = 1\n```</answer>", "no_code"),
            (THINK + A0 + R1 + "<answer>```python\n\n  \n```</answer>", "no_code"),
            (THINK + A0 + R1 + "<answer>```python\nx = 1\n</answer>", "unclosed_fence"),
        ],
    )
    def test_reason(self, text, why):
        t = parse_response(text)
        assert (t.ok, t.reason, t.programs, t.cycles) == (False, why, (), 0)
        assert why in REASONS

    def test_a_tag_inside_the_code_breaks_the_format(self):
        code = "print('</answer>')"
        assert reason(render_response("p", ["x = 0", code], ["r"])) == "stray_close_tag"

    def test_comparisons_in_code_are_not_tags(self):
        code = "if lo < answer and hi > 0:\n    pass\nif a <think> b: pass"
        assert parse_response(render_response("p", ["x = 0", code], ["r"])).ok is False  # <think> is exact
        code = "if lo < answer and hi > 0:\n    y = lo <reflection_count\n"
        assert parse_response(render_response("p", ["x = 0", code], ["r"])).ok


class TestHostile:
    def _fast(self, text: str, limit_s: float = 5.0) -> Trajectory:
        t0 = time.process_time()
        t = parse_response(text)
        assert time.process_time() - t0 < limit_s
        return t

    def test_huge_valid_response(self):
        big = "x = 1\n" * 200_000  # 1.2 MB per program
        t = self._fast(render_response("p" * 1_000_000, [big, big], ["r" * 1_000_000]))
        assert t.ok and len(t.programs[1]) == len(big)

    def test_a_thousand_cycles(self):
        t = self._fast(render_response("p", [f"x = {k}" for k in range(1001)], ["r"] * 1000))
        assert t.ok and t.cycles == 1000 and t.programs[-1] == "x = 1000\n"

    @pytest.mark.parametrize(
        "text",
        [
            "<" * 2_000_000,
            "<think" * 300_000,
            "< think " * 300_000,
            "<think>" * 300_000,
            "</answer>" * 200_000,
            "<think>" + "<" * 2_000_000 + "</think>",
            THINK + "<answer>" + "```python\n" * 500_000 + "</answer>",
            "\x00" * 1_000_000,
        ],
    )
    def test_pathological_inputs_fail_fast(self, text):
        assert self._fast(text).ok is False

    def test_control_bidi_and_private_use_characters(self):
        text = GOOD.replace("plan", "\x00\x1b[31m\ufeff\u202e\U0010ffff")
        assert parse_response(text).ok


_NO_TAGS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<`"), min_size=1).filter(
    lambda s: s.strip() != ""
)
_CODE_LINE = st.text(
    st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc"), blacklist_characters="<`"), min_size=1, max_size=40
)
_PROGRAM = st.lists(_CODE_LINE, min_size=1, max_size=5).map("\n".join).filter(lambda s: s.strip() != "")
_SOUP = st.lists(
    st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "<reflection>", "</reflection>"])
    | st.sampled_from(["```python\n", "```\n", "x = 1\n", " ", "text", "<Think>", "\n"]),
    max_size=30,
).map("".join)


class TestProperties:
    @settings(max_examples=200, deadline=None)
    @given(think=_NO_TAGS, programs=st.lists(_PROGRAM, min_size=2, max_size=6), data=st.data())
    def test_render_then_parse_round_trips(self, think, programs, data):
        notes = data.draw(st.lists(_NO_TAGS, min_size=len(programs) - 1, max_size=len(programs) - 1))
        t = parse_response(render_response(think, programs, notes))
        assert t.ok, t.reason
        assert t.cycles == len(programs) - 1 and len(t.programs) == t.cycles + 1
        assert t.think == think.strip() and t.reflections == tuple(n.strip() for n in notes)
        assert t.programs == tuple(p.rstrip() + "\n" for p in programs)

    @settings(max_examples=300, deadline=None)
    @given(st.text() | _SOUP)
    def test_never_raises_and_is_consistent(self, text):
        t = parse_response(text)
        assert t.ok == (t.reason is None)
        if t.ok:
            assert t.cycles >= 1 and len(t.programs) == t.cycles + 1 and all(p.strip() for p in t.programs)
        else:
            assert t.reason in REASONS and t.programs == () and t.cycles == 0

    @settings(max_examples=100, deadline=None)
    @given(junk=_NO_TAGS, where=st.integers(0, 4))
    def test_text_outside_the_sections_breaks_it(self, junk, where):
        parts = [THINK, A0, R1, A1]
        parts.insert(where, junk)
        assert reason("".join(parts)) == "text_outside_tags"
