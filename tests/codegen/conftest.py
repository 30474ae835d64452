"""Fixtures of the code-generation tests: a small problem, and real problems from ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from codethinker.codegen.task import CodegenProblem, make_problem

PREAMBLE = "from typing import *\n\ndef plus(a, b):\n    return a + b\n"


@pytest.fixture()
def add_problem() -> CodegenProblem:
    """``add(x)`` returns ``x + 1``; three tests, one with its input made by a preamble helper."""
    return CodegenProblem(
        id="add-one",
        question_id=1,
        difficulty="Easy",
        version="v0.2.0",
        prompt="Add one.",
        preamble=PREAMBLE,
        reference="class Solution:\n    def add(self, x: int) -> int:\n        return x + 1\n",
        entry_point="Solution().add",
        tests=("assert candidate(x = 1) == 2", "assert candidate(x = -1) == 0", "assert 6 == candidate(plus(2, 3))"),
    )


def fenced(code: str, tag: str = "python") -> str:
    return f"Here is the solution.\n```{tag}\n{code}```\nDone."


@pytest.fixture(scope="session")
def leetcode_problems(data_mirror: Path) -> list[CodegenProblem]:
    """Every problem of the merged v0.1.0 + v0.2.0 train splits (real data)."""
    from codethinker.data.sources import load_leetcode

    folder = data_mirror / "leetcodedataset"
    paths = [(v, folder / f"LeetCodeDataset-{v}-train.jsonl.gz") for v in ("v0.1.0", "v0.2.0")]
    if not all(p.is_file() for _, p in paths):
        pytest.skip(f"the LeetCodeDataset train splits are absent from {folder}")
    records, _ = load_leetcode(paths, extra=("test", "query"))
    return [make_problem(r) for r in records]
