"""codethinker.contra.calls: the entry call an answer line or assertion names."""

from __future__ import annotations

import ast
import doctest

from hypothesis import given
from hypothesis import strategies as st

import codethinker.contra.calls as calls
from codethinker.contra.calls import entry_call
from codethinker.data.inputs import _leading_call
from codethinker.evaluation.input_prediction import predicted_args

LITERALS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner),
    max_leaves=6,
)
ARGS = st.lists(LITERALS, max_size=3).map(lambda xs: ", ".join(map(repr, xs)))


def _expr(text: str) -> ast.AST:
    return ast.parse(text, mode="eval").body


class TestEntryCall:
    def test_doctest(self):
        assert doctest.testmod(calls).failed == 0

    @given(ARGS, LITERALS)
    def test_the_call_on_the_left_of_one_equality_whatever_its_strings_hold(self, args, value):
        for text in (f"f({args})", f"f({args}) == {value!r}"):
            call = entry_call(_expr(text), "f")
            assert call is not None and ast.get_source_segment(text, call) == f"f({args})"
            assert _leading_call(text, "f") == f"f({args})"
            assert predicted_args(f"[ANSWER]\nassert {text}\n[/ANSWER]") == args

    def test_anything_else_is_not_the_entry_call(self):
        for text in ("g(1)", "f.g(1)", "f(1) != 2", "f(1) == 2 == 2", "2 == f(1)", "f", "(f)(1) + 1", "[f(1)]"):
            assert entry_call(_expr(text), "f") is None, text
        assert entry_call(None, "f") is None
        assert entry_call(_expr("solve(1) == 2"), "solve") is not None
