"""codegen.answer: the program of a completion and the format check (property tests with hostile text)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.codegen.answer import REASONS, check_format, defines_entry, extract_program, parses

from .conftest import fenced

GOOD = "class Solution:\n    def add(self, x):\n        return x + 1\n"


class TestExtract:
    def test_the_last_python_block(self):
        text = fenced("x = 1\n") + "\nOr better:\n" + fenced(GOOD)
        assert extract_program(text) == GOOD

    def test_untagged_and_unterminated_blocks_count(self):
        assert extract_program(f"```\n{GOOD}```") == GOOD
        assert extract_program(f"Sure:\n```python\n{GOOD}") == GOOD

    def test_other_languages_and_empty_blocks_give_nothing(self):
        assert extract_program(fenced("int main() {}\n", "cpp")) == ""
        assert extract_program("```python\n\n```") == ""

    def test_bare_code_only_when_it_parses(self):
        assert extract_program(GOOD) == GOOD
        assert extract_program("The answer is: add one.") == ""
        assert extract_program("   \n") == ""


class TestFormat:
    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            (fenced(GOOD), None),
            (GOOD, "no_block"),
            (fenced(GOOD) + fenced(GOOD), "several_blocks"),
            (fenced(GOOD, "java"), "not_python"),
            (fenced("class Solution:\n    def add(self, x)\n"), "syntax_error"),
            (fenced("def add(self, x):\n    return x\n"), "no_entry_point"),
            (fenced("class Other:\n    def add(self, x):\n        return x\n"), "no_entry_point"),
            (fenced("class Solution:\n    def helper(self):\n        def add(x): ...\n"), "no_entry_point"),
        ],
    )
    def test_reasons(self, text, reason):
        assert check_format(text, "Solution().add") == (reason is None, reason)

    def test_defines_entry_on_nested_and_async(self):
        assert defines_entry("class Solution:\n    async def add(self): ...\n", "Solution().add")
        assert not defines_entry("if True:\n    class Solution:\n        def add(self): ...\n", "Solution().add")


_pieces = st.sampled_from(
    ["```", "```python", "```py\n", "\n", "class Solution:", "    def add(self, x):", "x = (", "\x00", "é", " "]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=400), st.lists(_pieces, max_size=30).map("\n".join)))
def test_never_raises_and_is_consistent(text):
    code = extract_program(text)
    ok, why = check_format(text, "Solution().add")
    assert isinstance(code, str) and (why is None) == ok and (why is None or why in REASONS)
    if ok:  # a well-formed answer's program is its one block, which defines the entry point
        assert defines_entry(code, "Solution().add") and parses(code)


def test_deeply_nested_code_is_a_syntax_error_not_a_crash():
    deep = "x = " + "(" * 5000 + ")" * 5000 + "\n"
    assert check_format(fenced(deep), "Solution().add") == (False, "syntax_error")
