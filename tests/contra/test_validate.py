"""validate: every strict-validity rule of SPEC §3 (paper App. D.1), one reason code each."""

from __future__ import annotations

import pytest

from codethinker.contra.render import TAGS, render_trace
from codethinker.contra.validate import parse_trace, prefix_score, validate

from .helpers import example_flow, make_flow, set_answer, set_locals, split_groups

FLOW = example_flow()  # blocks 0-1, 2, 3, 4 with weights 1, 1, 1, 2
GOOD = render_trace(FLOW, ["a", "b", "c", "d"])
LINES = GOOD.split("\n")


def sub(old: str, new: str, text: str = GOOD, count: int = 1) -> str:
    assert old in text
    return text.replace(old, new, count)


def reason(text: str) -> str | None:
    v = validate(text, FLOW)
    assert v.ok == (v.reason is None)
    return v.reason


def test_good_trace():
    v = validate(GOOD, FLOW)
    assert v.ok and v.reason is None and v.complete
    assert [(b.start, b.end) for b in v.blocks] == [(0, 1), (2, 2), (3, 3), (4, 4)]
    assert [b.thought for b in v.blocks] == ["a", "b", "c", "d"]
    assert [b.locals for b in v.blocks] == [b.locals for b in FLOW.blocks]
    assert v.blocks[0].code == ("def f(n):", "    a = n + 1")
    assert v.answer == [0, 1, 2] and v.answer_text == "[0, 1, 2]"
    p = parse_trace(GOOD)
    assert p.ok and p.answer == [0, 1, 2] and p.blocks[3].locals == FLOW.blocks[3].locals


def test_one_trailing_newline_is_allowed():
    assert reason(GOOD + "\n") is None
    assert reason(GOOD + "\n\n") == "wrapper"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n" + GOOD,
        GOOD[len("[TRACE]\n") :],
        GOOD[: -len("\n[/TRACE]")],
        "junk\n" + GOOD,
        GOOD + "\njunk",
        GOOD + "junk",
        GOOD + "\n[/TRACE]",
        sub("[TRACE]", "[trace]"),
        "[TRACE]",
        "[/TRACE]",
    ],
)
def test_wrapper(text):
    assert reason(text) in ("wrapper", "structure")
    assert not parse_trace(text).ok


@pytest.mark.parametrize("where", [i for i, ln in enumerate(LINES) if ln in TAGS])
@pytest.mark.parametrize("ws", [" ", "\t", "\r", "\u00a0"])
def test_tag_lines_must_stand_alone(where, ws):
    for variant in (ws + LINES[where], LINES[where] + ws, ws + LINES[where] + ws):
        lines = list(LINES)
        lines[where] = variant
        text = "\n".join(lines)
        assert reason(text) in ("tag_space", "wrapper"), variant
        assert not parse_trace(text).ok


def test_crlf_line_ends_are_rejected():
    assert reason(GOOD.replace("\n", "\r\n")) in ("tag_space", "wrapper")


@pytest.mark.parametrize(
    "text",
    [
        "[TRACE]\n[RETURN]\nassert f(2) == [0, 1, 2]\n[/RETURN]\n[/TRACE]",  # no block
        sub("[THOUGHT]\na\n[/THOUGHT]\n", ""),  # THOUGHT missing
        sub("[LOCALS]\n{'n': 2, 'a': 3}\n[/LOCALS]\n", ""),  # LOCALS missing
        sub("[CODE]\n[LINENO 0]    def f(n):\n[LINENO 1]        a = n + 1\n[/CODE]\n", ""),  # CODE missing
        sub("[/CODE]\n[THOUGHT]\na\n[/THOUGHT]", "[/CODE]\n[THOUGHT]\na"),  # unclosed THOUGHT
        sub("[RETURN]\nassert f(2) == [0, 1, 2]\n[/RETURN]\n", ""),  # no RETURN
        sub("[/RETURN]\n", "[/RETURN]\n[RETURN]\nassert f(2) == [0, 1, 2]\n[/RETURN]\n"),  # two RETURNs
        sub("[RETURN]", "[CODE]\n[/CODE]\n[THOUGHT]\n[/THOUGHT]\n[LOCALS]\n{}\n[/LOCALS]\n[RETURN]"),  # empty CODE
        sub("[CODE]\n", "stray line\n[CODE]\n"),
        sub("[/LOCALS]\n[RETURN]", "[/LOCALS]\n[/CODE]\n[RETURN]"),
        sub(
            "[THOUGHT]\na\n[/THOUGHT]\n[LOCALS]\n{'n': 2, 'a': 3}\n[/LOCALS]",
            "[LOCALS]\n{'n': 2, 'a': 3}\n[/LOCALS]\n[THOUGHT]\na\n[/THOUGHT]",
        ),  # groups out of order
        sub("[/CODE]\n[THOUGHT]\na", "[CODE]\n[THOUGHT]\na"),  # a tag inside a group
        "[TRACE]\n[CODE]\n[LINENO 0]    def f(n):\n[/TRACE]",
        "[TRACE]\n[/TRACE]",
    ],
)
def test_structure(text):
    assert reason(text) == "structure"
    assert parse_trace(text).reason == "structure"


@pytest.mark.parametrize(
    "bad",
    [
        "[LINENO 1]   a = n + 1",  # three spaces
        "[LINENO 1]\ta = n + 1",
        "[LINENO -1]    a = n + 1",
        "[LINENO 01]    a = n + 1",
        "[LINENO x]    a = n + 1",
        "[LINENO  1]    a = n + 1",
        "[lineno 1]    a = n + 1",
        "LINENO 1]    a = n + 1",
        "a = n + 1",
        "[LINENO 1]",
        "[LINENO 99999999999]    a = n + 1",
    ],
)
def test_lineno_format(bad):
    assert reason(sub("[LINENO 1]        a = n + 1", bad)) == "lineno"
    assert parse_trace(sub("[LINENO 1]        a = n + 1", bad)).reason == "lineno"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("[LINENO 0]", "[LINENO 1]"),  # first block must start at 0
        ("[LINENO 1]", "[LINENO 2]"),  # not consecutive within a block
        ("[LINENO 2]", "[LINENO 3]"),  # gap between blocks
        ("[LINENO 3]", "[LINENO 2]"),  # repeated
        ("[LINENO 4]", "[LINENO 40]"),
    ],
)
def test_lineno_order(old, new):
    assert reason(sub(old, new)) == "lineno_order"
    assert parse_trace(sub(old, new)).reason == "lineno_order"


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "None",
        "{'a': x}",
        "{'a': int(1)}",
        "{k: 1 for k in 'ab'}",
        "{'a': [i for i in range(2)]}",
        "",
        "{'a': 1",
        "dict(a=1)",
        "{'a': __import__('os')}",
        "{'a': 1} {'b': 2}",
        "{1, 2}",
        "({},)",
        "'{}'",
        "{'a': lambda: 1}",
        "{'a': 1 + 1}",
    ],
)
def test_locals_must_be_a_dict_literal(text):
    bad = set_locals(GOOD, 1, text)
    assert reason(bad) == "locals"
    assert parse_trace(bad).reason == "locals"


def test_locals_may_span_lines_and_reorder_keys():
    text = set_locals(GOOD, 1, "{'b': 6,\n 'a': 3,\n 'n': 2}")
    assert validate(text, FLOW).ok
    assert validate(text, FLOW).blocks[1].locals == {"n": 2, "a": 3, "b": 6}


@pytest.mark.parametrize(
    "line",
    [
        "assert f(2) != [0, 1, 2]",
        "assert f(2) == [0, 1, 2], 'msg'",
        "assert f(2) == [0, 1, 2] == [0, 1, 2]",
        "assert g(2) == [0, 1, 2]",
        "assert f.x(2) == [0, 1, 2]",
        "assert [0, 1, 2] == f(2)",
        "assert f(2) == list(range(3))",
        "assert f(2) == x",
        "assert f(2) == [i for i in range(3)]",
        "assert f(2) == [0, 1, 2]; import os",
        "f(2) == [0, 1, 2]",
        "assert f(2) ==",
        "[0, 1, 2]",
        "assert f(2) is [0, 1, 2]",
        "assert f(2) == __import__('os').system('true')",
    ],
)
def test_return(line):
    bad = sub("assert f(2) == [0, 1, 2]", line)
    assert reason(bad) == "return"


def test_return_holds_exactly_one_line():
    assert reason(sub("assert f(2) == [0, 1, 2]", "assert f(2) == [0, 1, 2]\nassert f(2) == [0, 1, 2]")) == "return"
    assert reason(sub("[RETURN]\nassert f(2) == [0, 1, 2]\n", "[RETURN]\n")) == "return"
    # blank lines around the assertion and outer white space are tolerated
    ok = sub("assert f(2) == [0, 1, 2]", "\n  assert f(2) == [0, 1, 2]  \n")
    assert validate(ok, FLOW).ok


def test_answer_may_differ_from_truth_and_still_be_valid():
    v = validate(set_answer(GOOD, "(0, 1, 2)"), FLOW)
    assert v.ok and v.answer == (0, 1, 2) and v.answer_text == "(0, 1, 2)"


def test_answer_text_with_non_ascii():
    v = parse_trace(set_answer(GOOD, "'héllo → ✓'"))
    assert v.ok and v.answer == "héllo → ✓" and v.answer_text == "'héllo → ✓'"


def test_entry_name_checked():
    assert parse_trace(GOOD, "f").ok
    assert parse_trace(GOOD).ok  # no entry given: any name
    assert parse_trace(GOOD, "g").reason == "return"
    flow = make_flow("def g(x):\n    return x\n", "1", [{"x": 1}], 1, entry="g")
    assert validate(render_trace(flow), flow).ok
    assert validate(render_trace(flow).replace("assert g(", "assert f("), flow).reason == "return"


def _split_block0(blocks: list[list[str]]) -> list[list[str]]:
    b0 = blocks[0]  # [CODE], LINENO 0, LINENO 1, [/CODE], [THOUGHT] ...
    return [["[CODE]", b0[1], "[/CODE]", *b0[4:]], ["[CODE]", b0[2], "[/CODE]", *b0[4:]]]


def _merge(a: list[str], b: list[str]) -> list[str]:
    code_a = a[1 : a.index("[/CODE]")]
    code_b = b[1 : b.index("[/CODE]")]
    return ["[CODE]", *code_a, *code_b, *b[b.index("[/CODE]") :]]


def test_block_count():
    head, blocks, tail = split_groups(GOOD)
    merged = [blocks[0], blocks[1], _merge(blocks[2], blocks[3])]  # 3 blocks, numbering intact
    text = "\n".join([*head, *(ln for b in merged for ln in b), *tail])
    assert parse_trace(text).ok
    assert reason(text) == "block_count"
    split = [*_split_block0(blocks), *blocks[1:]]  # 5 blocks
    text = "\n".join([*head, *(ln for b in split for ln in b), *tail])
    assert parse_trace(text).ok
    assert reason(text) == "block_count"
    # the last block dropped
    text = "\n".join([*head, *blocks[0], *blocks[1], *blocks[2], *tail])
    assert parse_trace(text).ok
    assert reason(text) == "block_count"
    # one block too many (an extra line numbered after the last)
    extra = ["[CODE]", "[LINENO 5]    pass", "[/CODE]", "[THOUGHT]", "[/THOUGHT]", "[LOCALS]", "{}", "[/LOCALS]"]
    text = "\n".join([*head, *(ln for b in blocks for ln in b), *extra, *tail])
    assert reason(text) == "block_count"


def test_block_range():
    head, blocks, tail = split_groups(GOOD)
    # block 0 split in two, blocks 2 and 3 merged: still 4 blocks, numbering intact, ranges differ
    regrouped = [*_split_block0(blocks), blocks[1], _merge(blocks[2], blocks[3])]
    text = "\n".join([*head, *(ln for b in regrouped for ln in b), *tail])
    assert parse_trace(text).ok
    assert reason(text) == "block_range"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("[LINENO 2]        b = a * 2", "[LINENO 2]        b = a * 3"),
        ("[LINENO 0]    def f(n):", "[LINENO 0]    def f(m):"),
        ("[LINENO 4]        return [i for i in range(c)]", "[LINENO 4]    "),
    ],
)
def test_code_must_match_the_source(old, new):
    assert reason(sub(old, new)) == "code"
    assert parse_trace(sub(old, new)).ok  # no truth: code is not checked


def test_code_outer_white_space_is_ignored():
    text = sub("[LINENO 2]        b = a * 2", "[LINENO 2]    b = a * 2   ")
    assert validate(text, FLOW).ok


def test_thought_may_hold_anything_but_tags():
    text = sub("[THOUGHT]\na\n", "[THOUGHT]\n[LINENO 7]    x\n{'not': 'locals'}\nassert f(1) == 2\n[ TRACE ]\n\n")
    assert validate(text, FLOW).ok


def test_parse_trace_does_not_need_a_truth():
    text = "[TRACE]\n[CODE]\n[LINENO 0]    anything\n[/CODE]\n[THOUGHT]\n[/THOUGHT]\n[LOCALS]\n{}\n[/LOCALS]\n"
    text += "[RETURN]\nassert h(1) == 'x'\n[/RETURN]\n[/TRACE]"
    v = parse_trace(text)
    assert v.ok and v.answer == "x" and v.blocks[0].locals == {}


# --------------------------------------------------------------------------- prefix_score
class TestPrefixScore:
    def cut(self, marker: str, k: int = 1) -> str:
        """GOOD up to and including the k-th occurrence of ``marker``'s line."""
        idx = [i for i, ln in enumerate(LINES) if ln == marker][k - 1]
        return "\n".join(LINES[: idx + 1]) + "\n"

    def test_empty_and_unfinished(self):
        assert prefix_score("", FLOW) == 0.0
        assert prefix_score("[TRACE]\n", FLOW) == 0.0
        assert prefix_score("[TRACE]\n[CODE]\n[LINENO 0]    def f(n):\n[LINENO 1]  ", FLOW) == 0.0
        assert prefix_score(self.cut("[/THOUGHT]"), FLOW) == 0.0

    def test_weighted_prefix_blocks(self):
        assert prefix_score(self.cut("[/LOCALS]", 1), FLOW) == 1.0
        assert prefix_score(self.cut("[/LOCALS]", 3), FLOW) == 3.0
        assert prefix_score(self.cut("[/LOCALS]", 4), FLOW) == 5.0
        assert prefix_score(self.cut("[/LOCALS]", 4), FLOW, use_weights=False) == 4.0
        assert prefix_score(GOOD, FLOW) == 5.0

    def test_a_wrong_block_stops_the_count(self):
        bad = set_locals(GOOD, 1, "{'n': 2, 'a': 3, 'b': 7}")
        assert prefix_score(bad, FLOW) == 1.0
        bad = set_locals(GOOD, 0, "{}")
        assert prefix_score(bad, FLOW) == 0.0

    def test_broken_format_scores_lowest(self):
        assert prefix_score("junk", FLOW) == 0.0  # an unfinished first line may still become [TRACE]
        assert prefix_score("junk\n", FLOW) == -1.0
        assert prefix_score(" [TRACE]\n", FLOW) == -1.0
        assert prefix_score(sub("[LINENO 0]", "[LINENO 3]"), FLOW) == -1.0
        assert prefix_score(set_locals(GOOD, 0, "[1]"), FLOW) == -1.0
        assert prefix_score(sub("[LINENO 2]        b = a * 2", "[LINENO 2]        b = 0"), FLOW) == -1.0


# --------------------------------------------------------------------------- spacing fast path
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from codethinker.contra.validate import _compact  # noqa: E402
from codethinker.contra.values import parse_literal as _parse  # noqa: E402
from codethinker.contra.values import strict_equal as _eq  # noqa: E402

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=6), st.floats(-1e6, 1e6))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(truth=_values, other=_values, spaces=st.lists(st.sampled_from(["", " ", "  ", "\n"]), min_size=1, max_size=40))
@example(truth={"{": ""}, other={"{": ""}, spaces=["\n"])  # CI found: a raw newline inside a quoted key
def test_compact_equal_implies_equal_values(truth, other, spaces):
    """The spacing fast path never calls two different literals equal, and accepts re-spacing."""
    truth_text = repr({"v": truth})
    respaced, k = [], 0
    for ch in repr({"v": other}):
        respaced.append(ch)
        if ch in ",:[]{}()":
            respaced.append(spaces[k % len(spaces)])
            k += 1
    text = "".join(respaced)
    if _compact(text) == _compact(truth_text):
        assert _eq(_parse(text), {"v": truth})
    if repr(other) == repr(truth) and "'" not in repr(other) and '"' not in repr(other):
        assert _compact(text) == _compact(truth_text)


@pytest.mark.parametrize("bad", ["{'a': 1 2}", "{'a': - 1}", "{'a' : 'x'  'y'}", "{'a': 1,}"])
def test_compact_does_not_hide_other_tokens(bad):
    assert _compact(bad) != _compact("{'a': 12}") or bad == "{'a': 12}"


def test_unclosed_quote_never_takes_the_fast_path():
    """A raw newline inside a quoted key is a syntax error, however the rest is spaced."""
    truth = repr({"v": {"{": ""}})
    assert _compact("{\n'v':\n {\n'{\n': ''}\n}") != _compact(truth)
    assert _compact("{ 'v' : { '{' : '' } }") == _compact(truth)
