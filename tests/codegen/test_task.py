"""codegen.task: the problem record, the entry point, the assertion splitter (with hostile inputs)."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.codegen.task import (
    ASK,
    CodegenProblem,
    EntryPointError,
    TestSplitError,
    make_problem,
    parse_entry,
    split_tests,
)

CHECK = (
    "def check(candidate):\n    assert candidate(nums = [1,2], k = 3) == [3]\n"
    "    assert candidate(nums = [], k = 0) == []\n"
)


def test_split_keeps_each_assert_as_written():
    assert split_tests(CHECK) == [
        "assert candidate(nums = [1,2], k = 3) == [3]",
        "assert candidate(nums = [], k = 0) == []",
    ]


def test_a_multiline_assert_is_one_test():
    text = "def check(candidate):\n    assert candidate(\n        x = 1\n    ) == [\n 2]\n"
    [one] = split_tests(text)
    assert ast.literal_eval(one.split("==")[1].strip()) == [2] and compile(one, "t", "exec")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("def check(candidate:\n", "does not parse"),
        ("def check(candidate):\n    x = 1\n    assert candidate(x) == 1\n", "statement 1 is a Assign"),
        ("def check(candidate):\n    for i in range(3):\n        assert candidate(i)\n", "statement 1 is a For"),
        ("def check(candidate, other):\n    assert candidate(1)\n", "exactly one argument"),
        ("def check(candidate):\n    assert candidate(1)\nimport os\n", "exactly one function"),
        ("def verify(candidate):\n    assert candidate(1)\n", "exactly one function"),
        ("def check(candidate):\n    '''no asserts'''\n", "statement 1 is a Expr"),
        ("", "exactly one function"),
        ("def check(candidate):\n    assert candidate('\x00')\n", "null bytes"),
        ("def check(candidate):\n    assert " + "(" * 3000 + ")" * 3000 + "\n", "does not parse"),
    ],
)
def test_unsplittable_tests_say_why(text, why):
    with pytest.raises(TestSplitError, match=why):
        split_tests(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_split_on_arbitrary_text_returns_asserts_or_says_why(text):
    try:
        tests = split_tests(text)
    except TestSplitError:
        return
    assert tests and all(isinstance(ast.parse(t).body[0], ast.Assert) for t in tests)


_exprs = st.sampled_from(
    ["candidate(1)", "candidate(x = [1, 2]) == [2]", "not candidate('a\\nb')", "candidate(-1) == -1"]
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_exprs, min_size=1, max_size=8), st.sampled_from(["    ", "  ", "\t"]))
def test_split_round_trips_generated_check_functions(exprs, indent):
    text = "def check(candidate):\n" + "".join(f"{indent}assert {e}\n" for e in exprs)
    assert split_tests(text) == [f"assert {e}" for e in exprs]


def test_entry_points():
    assert parse_entry("Solution().twoSum") == ("Solution", "twoSum")
    for bad in ("twoSum", "Solution.twoSum", "Solution(1).f", "Solution().f()", "__import__('os').system"):
        with pytest.raises(EntryPointError):
            parse_entry(bad)


def test_make_problem_from_a_record_and_back():
    rec = {
        "task_id": "t",
        "question_id": 3,
        "difficulty": "Easy",
        "version": "v0.2.0",
        "query": "Do it.\n```python\nclass Solution:\n    def f(self): ...\n```\n",
        "preamble": "import math\n",
        "completion": "class Solution:\n    def f(self):\n        return 1\n",
        "entry_point": "Solution().f",
        "test": "def check(candidate):\n    assert candidate() == 1\n",
    }
    p = make_problem(rec)
    assert p.prompt.endswith(ASK) and p.prompt.startswith("Do it.") and p.tests == ("assert candidate() == 1",)
    assert p.entry == ("Solution", "f") and p.split == "train"
    assert CodegenProblem.from_json(p.to_json()) == p
    with pytest.raises(TestSplitError):
        make_problem({**rec, "test": "def check(candidate):\n    pass\n"})
