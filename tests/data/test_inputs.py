"""gen_inputs: the mutate backend and the parser of model-written inputs."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codethinker.contra.values import parse_call_args
from codethinker.data.extract import filter_problems
from codethinker.data.inputs import generate, llm_prompt, mutate_inputs, parse_llm_inputs, select_functions

FN = {
    "task_id": "two-sum",
    "entry": "f",
    "code": "def f(nums, target):\n    return [0, 1]\n",
    "params": ["nums", "target"],
    "annotations": {"nums": "List[int]", "target": "int"},
    "returns": "List[int]",
    "examples": [{"args": "[2, 7, 11, 15], 9", "output": "[0,1]"}, {"args": "[3, 2, 4], 6", "output": "[1,2]"}],
}


def test_mutate_is_deterministic_distinct_and_literal():
    a = mutate_inputs(FN, 15, seed=0)
    assert a == mutate_inputs(FN, 15, seed=0)
    assert a != mutate_inputs(FN, 15, seed=1)
    assert len(a) == 15 and len(set(a)) == 15
    assert a[:2] == ["[2, 7, 11, 15], 9", "[3, 2, 4], 6"]  # the examples come first
    for text in a:
        args, kwargs = parse_call_args(text)
        assert not kwargs and len(args) == 2
        assert type(args[0]) is list and all(type(x) is int for x in args[0]) and type(args[1]) is int
    b = mutate_inputs(FN, 15, seed=0, include_examples=False)
    assert "[2, 7, 11, 15], 9" not in b[:1]


def test_mutate_respects_caps_and_shapes():
    grid = {**FN, "params": ["grid"], "examples": [{"args": repr([["1", "0"] * 10] * 20), "output": "1"}]}
    for text in mutate_inputs(grid, 15, seed=3, max_len=6, max_chars=400):
        (g,), _ = parse_call_args(text)
        assert len(text) <= 400 and all(set(row) <= {"1", "0"} for row in g)
        assert len(g) <= 20
    long_list = {**FN, "params": ["nums"], "examples": [{"args": repr(list(range(500))), "output": "1"}]}
    out = mutate_inputs(long_list, 10, seed=0, max_len=8, max_chars=400)
    assert out and all(len(parse_call_args(t)[0][0]) <= 12 for t in out)


def test_mutate_few_examples_gives_what_it_can():
    one = {**FN, "params": ["flag"], "examples": [{"args": "True", "output": "1"}]}
    assert sorted(mutate_inputs(one, 15, seed=0)) == ["False", "True"]
    assert mutate_inputs({**FN, "examples": []}, 15, seed=0) == []


def test_select_functions_prefix_property():
    fns = [{"task_id": f"t{i}"} for i in range(50)]
    small, big = select_functions(fns, 10, 0), select_functions(fns, 20, 0)
    assert len(small) == 10 and {f["task_id"] for f in small} <= {f["task_id"] for f in big}
    assert select_functions(fns, 0, 0) == fns and select_functions(fns, None, 0) == fns
    assert select_functions(fns, 10, 1) != small


def test_parse_llm_answer():
    answer = (
        "<think>let me think f([1], 2)</think>\n"
        "Here are the inputs:\n```python\n"
        "f([1, 2, 3], 4)\n"
        "assert f(nums=[5], target=5) == [0]\n"
        "- f([1, 2, 3], 4)\n"
        "f([1, 2], target=x)\n"
        "f(__import__('os').system('echo pwned'), 1)\n"
        "f([1, 2])\n"
        "g([1], 2)\n"
        "1. f([9, 9], -1)\n"
        "```\n"
    )
    found, rejected = parse_llm_inputs(answer, ["nums", "target"])
    assert found == ["[1, 2, 3], 4", "[5], 5", "[9, 9], -1"]
    assert rejected == {"not_a_call": 2, "duplicate": 1, "not_literal": 2, "wrong_arguments": 1}


@pytest.mark.parametrize(
    "line",
    [
        "f(" + "[" * 5000 + "]" * 5000 + ")",
        "f(" + "9" * 100000 + ")",
        "f((lambda: 1)())",
        "f({**a})",
        "f(1 if True else 2)",
        "f(" + "1, " * 1000 + ")",
        "f(a.b)",
    ],
)
def test_hostile_lines_rejected(line):
    found, rejected = parse_llm_inputs(line, ["a"])
    assert found == [] and sum(rejected.values()) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parser_never_crashes(text):
    found, _ = parse_llm_inputs(text, ["a", "b"])
    for args in found:
        assert len(parse_call_args(args)[0]) == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=3), min_size=2, max_size=2))
@example(values=[0, " == "])  # a string argument holding " == " was cut there (found by this test)
def test_parser_reads_literal_calls(values):
    line = f"f({values[0]!r}, {values[1]!r})"
    found, _ = parse_llm_inputs(line, ["a", "b"])
    assert found == [f"{values[0]!r}, {values[1]!r}"]


@pytest.mark.parametrize(
    "line, args",
    [
        ("f(0, ' == ')", "0, ' == '"),
        ("f(' == ', [1]) == 3", "' == ', [1]"),
        ("assert f('a == b', 2) == 'x == y'", "'a == b', 2"),
        ("f(1, 2);", "1, 2"),
        ('- f("==", 0) == True', "'==', 0"),  # arguments come back in repr's quotes
    ],
)
def test_parser_cuts_the_call_where_it_ends_not_inside_a_string(line, args):
    found, rejected = parse_llm_inputs(line, ["a", "b"])
    assert found == [args] and not rejected


@pytest.mark.parametrize(
    "line",
    ["f(" + "[" * 300 + "]" * 300 + ", 1)", "f(" + "+".join(["1"] * 200000) + ", 2)", "f(-" + "-" * 100000 + "1, 2)"],
)
def test_parser_rejects_calls_too_deep_or_long_for_the_parser(line):
    found, rejected = parse_llm_inputs(line, ["a", "b"])
    assert found == [] and sum(rejected.values()) == 1


def test_prompt_carries_signature_and_examples():
    msgs = llm_prompt(FN, 15)
    text = msgs[0]["content"]
    assert msgs[0]["role"] == "user"
    assert "f(nums: List[int], target: int) -> List[int]" in text and "f([2, 7, 11, 15], 9)" in text
    assert "Write 15 new" in text


def test_generate_on_real_functions(leetcode_problems):
    fns, _, _ = filter_problems(leetcode_problems)
    records, counts = generate(fns[:30], backend="mutate", n=15, seed=0)
    assert counts["pairs_requested"] == 450 and counts["pairs"] + counts["short_of_n"] == 450
    assert counts["pairs"] > 350
    for r in records:
        assert len(r["inputs"]) <= 15
        for text in r["inputs"]:
            args, kwargs = parse_call_args(text)
            assert len(args) == len(r["params"]) and not kwargs
    with pytest.raises(ValueError, match="backend"):
        generate(fns[:1], backend="nope", n=1, seed=0)
