"""Property tests on real flows: every single corruption of a valid trace costs reward, a right
answer after a wrong block never opens the gate, and the validator never raises (SPEC §3-§4)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codethinker.contra.render import TAGS, render_trace
from codethinker.contra.tracer import Flow
from codethinker.contra.validate import parse_trace, prefix_score, validate
from codethinker.rewards.crm import CRMConfig, crm_score
from codethinker.rewards.orm import orm_score
from codethinker.rewards.whitebox import whitebox_score

from .helpers import corrupt_locals_text, join_groups, set_locals, split_groups

PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WHITE = [" ", "\t", "\r", "  ", "\x0b", "\x0c", "\u00a0", "\u2003", "\u3000"]


@st.composite
def clean_trace(draw, flows: list[Flow]) -> tuple[Flow, str]:
    """A real flow and its ground-truth trace with arbitrary thoughts (reward 4)."""
    flow = draw(st.sampled_from(flows))
    thoughts = draw(st.lists(st.text(max_size=40), min_size=len(flow.blocks), max_size=len(flow.blocks)))
    text = render_trace(flow, thoughts)
    score = crm_score(text, flow)
    assert score["reward"] == 4.0, (score, text)
    return flow, text


def corrupt(draw, flow: Flow, text: str, kind: str) -> str:
    head, blocks, tail = split_groups(text)
    n = len(blocks)
    if kind == "locals":
        i = draw(st.integers(0, n - 1))
        return set_locals(text, i, corrupt_locals_text(flow.blocks[i].locals_text, draw(st.integers(0, 5))))
    if kind == "lineno":
        lines = text.split("\n")
        idx = draw(st.sampled_from([k for k, ln in enumerate(lines) if ln.startswith("[LINENO ")]))
        old = int(lines[idx][len("[LINENO ") : lines[idx].index("]")])
        new = draw(st.integers(0, 10**6).filter(lambda x: x != old))
        lines[idx] = lines[idx].replace(f"[LINENO {old}]", f"[LINENO {new}]", 1)
        return "\n".join(lines)
    if kind == "code":
        lines = text.split("\n")
        idx = draw(st.sampled_from([k for k, ln in enumerate(lines) if ln.startswith("[LINENO ")]))
        lines[idx] += draw(st.sampled_from([" + 1", "x", "#", "()"]))
        return "\n".join(lines)
    if kind == "tag_space":
        lines = text.split("\n")
        idx = draw(st.sampled_from([k for k, ln in enumerate(lines) if ln in TAGS]))
        ws = draw(st.sampled_from(WHITE))
        lines[idx] = draw(st.sampled_from([ws + lines[idx], lines[idx] + ws, ws + lines[idx] + ws]))
        return "\n".join(lines)
    if kind == "swap":
        i, j = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
        blocks[i], blocks[j] = blocks[j], blocks[i]
        return join_groups(head, blocks, tail)
    if kind == "drop":
        del blocks[draw(st.integers(0, n - 1))]
        return join_groups(head, blocks, tail)
    if kind == "duplicate":
        i = draw(st.integers(0, n - 1))
        blocks.insert(draw(st.integers(0, n)), list(blocks[i]))
        return join_groups(head, blocks, tail)
    if kind == "before":
        return draw(st.text(min_size=1, max_size=30)) + text
    if kind == "after":
        return text + draw(st.text(min_size=1, max_size=30).filter(lambda s: s != "\n"))
    raise AssertionError(kind)


KINDS = ["locals", "lineno", "code", "tag_space", "swap", "drop", "duplicate", "before", "after"]


@pytest.mark.parametrize("kind", KINDS)
def test_any_single_corruption_costs_reward(real_flows, kind):
    flows = [f for f in real_flows if kind != "swap" or len(f.blocks) >= 2]

    @PROPS
    @given(data=st.data())
    def check(data):
        flow, text = data.draw(clean_trace(flows))
        bad = corrupt(data.draw, flow, text, kind)
        assert bad != text
        s = crm_score(bad, flow)
        assert s["fmt"] == 0 or s["reward"] < 4.0, (kind, s)
        if kind == "locals":
            assert s["fmt"] == 1 and s["reward"] < 2.0  # the gate is closed
        else:
            assert s["fmt"] == 0 and s["reward"] == 0.0, (kind, s)
        assert validate(bad, flow).ok == bool(s["fmt"])

    check()


def test_right_answer_after_a_wrong_block_never_opens_the_gate(real_flows):
    @PROPS
    @given(data=st.data())
    def check(data):
        flow, text = data.draw(clean_trace(real_flows))
        i = data.draw(st.integers(0, len(flow.blocks) - 1))
        bad = set_locals(text, i, corrupt_locals_text(flow.blocks[i].locals_text, data.draw(st.integers(0, 5))))
        s = crm_score(bad, flow)
        assert s["fmt"] == 1 and s["answer_ok"] == 1
        assert s["r_res"] == 2.0
        assert s["r_proc"] < 2.0
        assert s["reward"] < 4.0
        assert s["reward"] == s["r_proc"]
        assert s["deltas"][i] == 0 and all(s["deltas"][:i]) and s["rcs"] == i / len(flow.blocks)
        # without the gate the right answer is paid again
        assert crm_score(bad, flow, CRMConfig(gate=False))["reward"] == s["r_proc"] + 2.0

    check()


def test_wrong_answer_after_right_blocks_scores_exactly_2(real_flows):
    @PROPS
    @given(data=st.data())
    def check(data):
        flow, text = data.draw(clean_trace(real_flows))
        head, blocks, tail = split_groups(text)
        tail[1] = f"assert {flow.entry}({flow.input}) == {('wrong', flow.output)!r}"
        s = crm_score(join_groups(head, blocks, tail), flow)
        assert (s["fmt"], s["r_proc"], s["r_res"], s["reward"], s["rcs"]) == (1, 2.0, 0.0, 2.0, 1.0)

    check()


# --------------------------------------------------------------------------- never raises
def all_scorers(text: str, flow: Flow) -> None:
    v = parse_trace(text)
    assert v.ok == (v.reason is None)
    parse_trace(text, flow.entry)
    v = validate(text, flow)
    assert v.ok == (v.reason is None)
    p = prefix_score(text, flow)
    assert p == -1.0 or 0.0 <= p <= sum(flow.weights)
    for cfg in (CRMConfig(), CRMConfig(prefix=False, gate=False, ccw=False)):
        s = crm_score(text, flow, cfg)
        assert s["fmt"] in (0, 1) and 0.0 <= s["reward"] <= 4.0 and 0.0 <= s["rcs"] <= 1.0
        assert s["fmt"] == int(v.ok)
    o = orm_score(text, flow)
    assert o["reward"] in (0.0, 2.0)
    w = whitebox_score(text, flow)
    assert 0.0 <= w["reward"] <= 2.0


@PROPS
@given(text=st.text(max_size=400))
def test_never_raises_on_arbitrary_text(hand_flows, text):
    for flow in hand_flows[:2]:
        all_scorers(text, flow)


@PROPS
@given(
    parts=st.lists(
        st.sampled_from(
            [
                *TAGS,
                "[LINENO 0]    def f(n):",
                "[LINENO 1]        a = n + 1",
                "{}",
                "{'n': 2}",
                "assert f(2) == [0, 1, 2]",
                "",
                " ",
                "[WHITEBOX]",
                "[/WHITEBOX]",
                "[ANSWER]",
                "[/ANSWER]",
                "Q1: 2",
                "x",
            ]
        ),
        max_size=40,
    )
)
def test_never_raises_on_tag_soup(hand_flows, parts):
    all_scorers("\n".join(parts), hand_flows[0])


LINE = st.one_of(
    st.sampled_from(list(TAGS)),
    st.sampled_from(list(TAGS)).flatmap(lambda t: st.sampled_from(WHITE).map(lambda w: w + t)),
    st.integers(-2, 60).map(lambda i: f"[LINENO {i}]    x = 1"),
    st.sampled_from(
        [
            "{}",
            "{'a': 1}",
            "[1]",
            "assert f(1) == 2",
            "assert f() == f()",
            "(",
            "'''",
            "\\",
            "\x00",
            "\ud800",
            "\r",
            "{'a': " + "[" * 300 + "]" * 300 + "}",
        ]
    ),
    st.text(max_size=30),
)


@st.composite
def mutated_trace(draw, flows: list[Flow]) -> tuple[Flow, str]:
    flow, text = draw(clean_trace(flows))
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "tag"]))
        k = draw(st.integers(0, len(lines)))
        if op == "insert":
            lines.insert(k, draw(LINE))
        elif op == "delete" and lines:
            del lines[min(k, len(lines) - 1)]
        elif op == "replace" and lines:
            lines[min(k, len(lines) - 1)] = draw(LINE)
        elif op == "tag":
            lines.insert(k, draw(st.sampled_from(list(TAGS))))
    return flow, "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n", "\r\n"]))


@PROPS
@given(data=st.data())
def test_never_raises_on_mutated_traces(real_flows, data):
    flow, text = data.draw(mutated_trace(real_flows))
    all_scorers(text, flow)
    # a mutation never scores above the clean trace, and a valid mutation keeps the structure
    v = validate(text, flow)
    if v.ok:
        assert len(v.blocks) == len(flow.blocks)


@PROPS
@given(data=st.data())
def test_prefixes_of_a_clean_trace(real_flows, data):
    """Every prefix of a clean trace is a well-formed partial trace whose score never decreases."""
    flow, text = data.draw(clean_trace(real_flows))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), min_size=1, max_size=6)))
    scores = [prefix_score(text[:c], flow) for c in cuts]
    assert all(s >= 0.0 for s in scores)
    assert scores == sorted(scores)
    assert prefix_score(text, flow) == sum(flow.weights)
