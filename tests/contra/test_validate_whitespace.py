"""White space, huge numbers and hash collisions in LOCALS and RETURN.

White space counts only where Python's tokenizer allows it; the spacing fast path and the parser
agree on every text; numbers, sets and dicts that would cost quadratic work are rejected by rule,
not by a clock. The linear bound itself is shown by ``benchmarks/bench_reward_worst.py``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Block
from codethinker.contra.validate import ParsedBlock, _compact, _respaced, _truth_locals
from codethinker.contra.values import (
    MAX_INT_DIGITS,
    MAX_SAME_HASH,
    PY_SPACE,
    check_numbers,
    lex,
    parse_literal,
    strict_equal,
)
from codethinker.rewards.crm import crm_score

from .helpers import make_flow, set_answer, set_locals

SRC = "def f(n):\n    a = n + 1\n    b = a * 2\n    c = b - 3\n    return [i for i in range(c)]\n"
LOC = {"n": -1000, "s": "xy", "t": (1.5, None)}
FLOW = make_flow(SRC, "2", [LOC] * 4, [0, 1, 2])
GOOD = render_trace(FLOW, ["a", "b", "c", "d"])
TRUTH = FLOW.blocks[1].locals_text  # "{'n': -1000, 's': 'xy', 't': (1.5, None)}"
HASH_MOD = 2**61 - 1  # CPython: hash(k * HASH_MOD) == 0 for every int k


def score(locals_text: str) -> dict:
    return crm_score(set_locals(GOOD, 1, locals_text), FLOW)


@contextmanager
def int_digits_unlimited() -> Iterator[None]:
    """What a library that calls ``sys.set_int_max_str_digits(0)`` does to the whole process."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(old)


# --------------------------------------------------------------------------- the literal grammar
@pytest.mark.parametrize(
    "text",
    [
        TRUTH.replace("-1000", "-" + " " * 3000 + "1000"),  # white space after a unary minus
        TRUTH.replace("'xy'", "'x'" + " " * 3000 + "'y'"),  # adjacent strings concatenate
        TRUTH.replace(": ", ":" + " \t" * 500),
        TRUTH.replace(", ", ",\n\n    "),
        TRUTH.replace(": ", ":\f"),  # form feed is white space to the tokenizer
        TRUTH.replace(", ", ",\r"),  # so is a lone CR inside brackets
        TRUTH.replace(", ", ", # a comment\n"),
        TRUTH.replace(", ", ", \\\n"),  # a backslash-newline joins lines
        " \t\n" + TRUTH + "\n\f ",
        "{'n':-1000,'s':'xy','t':(1.5,None)}",
    ],
)
def test_white_space_where_python_allows_it_is_equal(text):
    s = score(text)
    assert (s["fmt"], s["deltas"], s["reward"]) == (1, [1, 1, 1, 1], 4.0)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (TRUTH.replace("-1000", "-1" + " " * 3000 + "000"), "inside a number"),
        (TRUTH.replace("-1000", "-1 000"), "inside a number"),
        (TRUTH.replace("1.5", "1. 5"), "inside a float"),
        (TRUTH.replace("None", "No ne"), "inside a name"),
        (TRUTH.replace(": ", ":\xa0"), "no-break space is not white space to Python"),
        (TRUTH.replace(": ", ":\v"), "vertical tab"),
        (TRUTH.replace(", ", ",\u2028"), "line separator"),
        (TRUTH.replace(", ", ",\x1c"), "file separator"),
        (TRUTH.replace(", ", ",\x85"), "next line"),
        (TRUTH.replace(", ", ",\u3000"), "ideographic space"),
        ("\xa0" + TRUTH, "leading no-break space"),
        (TRUTH + "\u2029", "trailing paragraph separator"),
    ],
)
def test_white_space_where_python_forbids_it_is_not_a_literal(text, why):
    s = score(text)
    assert (s["fmt"], s["reason"], s["reward"]) == (0, "locals", 0.0), why
    with pytest.raises(ValueError):
        parse_literal(text)


def test_space_inside_a_number_of_the_answer_is_not_the_answer():
    s = crm_score(set_answer(GOOD, "[0, 1,\xa02]"), FLOW)
    assert (s["fmt"], s["reason"]) == (0, "return")
    assert crm_score(set_answer(GOOD, "[0,\f1,  2]"), FLOW)["reward"] == 4.0
    assert crm_score(set_answer(GOOD, "[0, 1, 2]\xa0"), FLOW)["reason"] == "return"


# --------------------------------------------------------------------------- fast path == slow path
def slow_equal(text: str, truth_text: str) -> bool | None:
    """The reference: parse, then type-strict equality (``None``: not a dict literal)."""
    try:
        value = parse_literal(text)
    except ValueError:
        return None
    if type(value) is not dict:
        return None
    return strict_equal(value, parse_literal(truth_text))


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.text(alphabet="ab '\"\\\n#{}:,0", max_size=5),
    st.binary(max_size=3),
    st.floats(-1e6, 1e6),
    st.complex_numbers(max_magnitude=1e3, allow_nan=False, allow_infinity=False),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.frozensets(st.integers(-5, 5), max_size=3).map(set),
        st.dictionaries(st.text(alphabet="ab'", max_size=2), inner, max_size=3),
    ),
    max_leaves=10,
)
_spaces = st.sampled_from(
    [" ", "  ", "\t", "\n", "\r\n", "\r", "\f", "\\\n", "#x\n", "\xa0", "\v", "\u2028", "\x1c", "\u3000", "\x85"]
)


@settings(max_examples=500, deadline=None)
@given(truth=_values, inserts=st.lists(st.tuples(st.integers(0, 10**6), _spaces), max_size=6))
@example(truth=-1000, inserts=[(2, " ")])  # "{'v': - 1000}": equal
@example(truth=1000, inserts=[(7, " ")])  # "{'v': 1 000}": not a literal
@example(truth=1, inserts=[(5, "\xa0")])  # "{'v':\xa01}": not a literal (the old fast path said equal)
@example(truth="a b", inserts=[(8, "\t")])  # white space inside a string changes the value
def test_fast_path_agrees_with_the_parser(truth, inserts):
    """Random white space anywhere (inside numbers, strings, names): the validator's reading of a
    LOCALS body is always the parser's; the fast path only ever claims equality the parser confirms."""
    truth_text = repr({"v": truth})
    text = truth_text
    for pos, ws in inserts:
        at = 5 + pos % (len(text) - 4)  # after "{'v':", up to the end
        text = text[:at] + ws + text[at:]
    tb = Block(0, 0, 1, parse_literal(truth_text), truth_text)
    pb = ParsedBlock(0, 0, ("",), "", text)
    expected = slow_equal(text, truth_text)
    if _respaced(text, truth_text):
        assert expected is True, text
    got = _truth_locals(pb, tb)
    assert (None if got is None else strict_equal(got, tb.locals)) == expected, text


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="[](){}'\",:-+.0123456789jeExrbf_TrueFalsNon#\\ \t\n\r\f\v\xa0", max_size=40))
def test_parse_literal_is_literal_eval(text):
    """Same grammar as ``ast.literal_eval`` (after stripping outer Python white space)."""
    try:
        expected = ast.literal_eval(text.strip(PY_SPACE))
    except Exception:  # literal_eval raises many kinds; all mean "not a literal"
        expected = ValueError
    try:
        got = parse_literal(text)
    except ValueError:
        got = ValueError
    if expected is ValueError or got is ValueError:
        assert got is expected
    else:
        assert strict_equal(got, expected)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("{'a': 1}", ["code", "str", "code"]),
        ("'''a'b''' 1", ["str", "code"]),
        ("'a\\'b' # c'\n'd'", ["str", "code", "comment", "code", "str"]),
        ("rb'\\\\' f'x'", ["code", "str", "code", "fstr"]),
        ("'a\\\r\nb'", ["str"]),
    ],
)
def test_lex(text, kinds):
    spans = lex(text)
    assert [k for k, _, _ in spans] == kinds
    assert "".join(text[a:b] for _, a, b in spans) == text


@pytest.mark.parametrize("text", ["'abc", "'a\nb'", "'a\rb'", "'''abc''", "'a\\'"])
def test_lex_unterminated(text):
    with pytest.raises(ValueError, match="unterminated"):
        lex(text)


def test_compact_keeps_what_changes_tokens():
    assert _compact("{ 'a' :\n 1 ,\t'b': [ 2 ] }") == "{'a':1,'b':[2]}"
    assert _compact("{'a': 1  000}") == "{'a':1 000}" != _compact("{'a': 1000}")
    assert _compact("{'a':\xa01}") != _compact("{'a': 1}")
    assert _compact("{'a': '1  2'}") == "{'a':'1  2'}"


# --------------------------------------------------------------------------- numbers Python converts in quadratic time
def test_long_decimal_numbers_are_rejected_whatever_the_process_limit():
    big = "7" * (MAX_INT_DIGITS + 1)
    with int_digits_unlimited():
        for text in (f"{{'a': {big}}}", f"{{'a': -{big}}}", f"[{big[:10]}_{big}]", f"{big}.5", f"({big}j)"):
            with pytest.raises(ValueError, match="digits"):
                parse_literal(text)
        assert parse_literal("7" * MAX_INT_DIGITS) == int("7" * MAX_INT_DIGITS)
        assert parse_literal(f"'{big}'") == big  # digits inside a string are text
        assert parse_literal(f"0x{'f' * 5000}") == int("f" * 5000, 16)  # power-of-two bases are linear
        pad = "p" * 1500  # a truth long enough that the LOCALS length cap lets the number through
        flow = make_flow(SRC, "2", [{**LOC, "pad": pad}] * 4, [0, 1, 2])
        text = set_locals(render_trace(flow), 1, f"{{'n': {big}, 's': 'xy', 't': (1.5, None), 'pad': {pad!r}}}")
        s = crm_score(text, flow)
        assert (s["fmt"], s["reason"]) == (0, "locals")
        s = crm_score(set_answer(GOOD, f"[0, 1, {big}]"), FLOW)
        assert (s["fmt"], s["reason"]) == (0, "return")


def test_digits_count_everywhere_after_an_f_string():
    with pytest.raises(ValueError, match="digits"):
        check_numbers("f'{" + "1" * (MAX_INT_DIGITS + 1) + "}'")
    with pytest.raises(ValueError, match="digits"):
        check_numbers("f'{x}', '" + "1" * (MAX_INT_DIGITS + 1) + "'")
    check_numbers("'" + "1" * (MAX_INT_DIGITS + 1) + "' # " + "2" * (MAX_INT_DIGITS + 1))


# --------------------------------------------------------------------------- hash collisions
def test_sets_and_dicts_of_colliding_members_are_rejected():
    many = [k * HASH_MOD for k in range(1, MAX_SAME_HASH + 2)]
    assert len({hash(m) for m in many}) == 1
    with pytest.raises(ValueError, match="hash"):
        parse_literal(repr(set(many)))
    with pytest.raises(ValueError, match="hash"):
        parse_literal(repr(dict.fromkeys(many, 0)))
    with pytest.raises(ValueError, match="hash"):
        parse_literal(repr({"v": [{(m,): 1 for m in many}]}))  # nested, tuple keys
    assert parse_literal(repr(set(many[:MAX_SAME_HASH]))) == set(many[:MAX_SAME_HASH])
    assert parse_literal(repr(set(range(5000)))) == set(range(5000))
    s = score(f"{{'n': -1000, 's': 'xy', 't': (1.5, None), 'h': {set(many)!r}}}")
    assert (s["fmt"], s["reason"]) == (0, "locals")


class _Colliding:
    """Hashes alike, counts equality checks (hash-table work)."""

    calls = 0

    def __init__(self, i: int) -> None:
        self.i = i

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        _Colliding.calls += 1
        return isinstance(other, _Colliding) and other.i == self.i


def test_strict_equal_builds_tables_from_the_truth_only():
    """A rollout's set whose members all hash alike costs linear work against a small truth."""
    n = 300
    rollout_set = {_Colliding(i) for i in range(n)}  # quadratic to build, as literal_eval would
    _Colliding.calls = 0
    assert not strict_equal(rollout_set, set(range(n)))
    assert not strict_equal(rollout_set, {_Colliding(0)} | set(range(1, n)))
    assert _Colliding.calls <= 2 * n  # the old code compared every pair of the rollout's members
    rollout_dict = dict.fromkeys(rollout_set, 0)
    _Colliding.calls = 0
    assert not strict_equal(rollout_dict, dict.fromkeys(range(n), 0))
    assert _Colliding.calls <= 2 * n


# --------------------------------------------------------------------------- deep RETURN arguments
@pytest.mark.parametrize("arg", ["-" * 1500 + "2", "not " * 1500 + "2", "+" * 2000 + "2"])
def test_deep_call_arguments_in_return_are_rejected_not_raised(arg):
    text = GOOD.replace("assert f(2) ==", f"assert f({arg}) ==")
    assert text != GOOD
    s = crm_score(text, FLOW)
    assert (s["fmt"], s["reason"], s["reward"]) == (0, "return", 0.0)
