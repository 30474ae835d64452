"""One code-generation problem: :class:`CodegenProblem`, built from a LeetCodeDataset record.

* ``prompt``: the record's ``query`` (LeetCodeDataset's own prompt: the problem statement, then
  "Please complete the following python code precisely" and the starter code in a ```python block),
  followed by :data:`ASK`, the answer format the format reward checks. The train splits have no
  ``problem_description``/``starter_code`` fields (only v0.3.1's test split has them), so the query is
  the one text every training record has.
* ``reference``: the record's ``completion`` (``class Solution: ...``); ``preamble``: its ``prompt``
  (the imports and helpers such as ``ListNode``/``list_node`` that the solution and the tests use),
  which the judge runs before any program, as LeetCodeDataset's own evaluation does.
* ``tests``: the body of ``def check(candidate)`` split by :func:`split_tests` into its single
  ``assert`` statements (their source text), so each runs under its own time limit.

>>> split_tests("def check(candidate):\\n    assert candidate(x = 1) == 2\\n    assert candidate(x = 0) == 0\\n")
['assert candidate(x = 1) == 2', 'assert candidate(x = 0) == 0']
>>> split_tests("def check(candidate):\\n    x = 1\\n    assert candidate(x) == 2\\n")
Traceback (most recent call last):
...
codethinker.codegen.task.TestSplitError: check's statement 1 is a Assign, not an assert
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import asdict, dataclass
from typing import Any

from codethinker.codegen.checks import parse_check
from codethinker.errors import CodethinkerError

__all__ = ["ASK", "CodegenProblem", "EntryPointError", "TestSplitError", "make_problem", "parse_entry", "split_tests"]

ASK = "Write the complete solution (the class Solution with its method) in one ```python code block."
_ENTRY = re.compile(r"([A-Za-z_]\w*)\(\)\.([A-Za-z_]\w*)")


class TestSplitError(CodethinkerError, ValueError):
    """A record's ``test`` is not ``def check(candidate)`` made of assert statements only."""

    __test__ = False  # not a pytest class


class EntryPointError(CodethinkerError, ValueError):
    """A record's ``entry_point`` is not ``Class().method``."""


@dataclass(frozen=True)
class CodegenProblem:
    """One problem: what the policy sees, the reference solution, and the tests the judge runs."""

    id: str  # LeetCodeDataset's task_id (the problem's slug)
    question_id: int | None
    difficulty: str | None
    version: str  # the train split the record came from (v0.2.0 wins over v0.1.0)
    prompt: str  # the user message (see the module docstring)
    preamble: str  # imports and helpers run before the program and the tests
    reference: str  # the reference solution (class Solution)
    entry_point: str  # "Solution().method": a fresh instance per test
    tests: tuple[str, ...]  # single assert statements over ``candidate``
    split: str = "train"  # train | heldout

    @property
    def entry(self) -> tuple[str, str]:
        """(class name, method name) of the entry point."""
        return parse_entry(self.entry_point)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "tests": list(self.tests)}

    @classmethod
    def from_json(cls, rec: dict[str, Any]) -> CodegenProblem:
        return cls(**{**rec, "tests": tuple(rec["tests"])})


def parse_entry(entry_point: str) -> tuple[str, str]:
    """``"Solution().twoSum"`` -> ``("Solution", "twoSum")``; anything else is an :class:`EntryPointError`."""
    m = _ENTRY.fullmatch(entry_point.strip())
    if m is None:
        raise EntryPointError(f"entry point {entry_point!r} is not Class().method")
    return m.group(1), m.group(2)


def _parse(source: str) -> ast.Module:
    with warnings.catch_warnings():  # invalid escapes in string literals
        warnings.simplefilter("ignore")
        return ast.parse(source)


def split_tests(test: str) -> list[str]:
    """The assert statements of ``def check(candidate)`` in ``test``, as source text, in order.

    A :class:`TestSplitError` (with the reason) when ``test`` does not parse, is not one function
    ``check`` of one argument, or its body holds anything but asserts (a statement that sets up
    state for the next ones cannot run alone)."""
    try:
        tree = _parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise TestSplitError(f"the test does not parse: {type(exc).__name__}: {exc}") from None
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(tree.body) != 1 or len(fns) != 1:
        raise TestSplitError("the test is not exactly one function check(candidate)")
    fn = fns[0]
    if [a.arg for a in fn.args.args] != ["candidate"] or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise TestSplitError("check does not take exactly one argument, candidate")
    out = []
    for i, stmt in enumerate(fn.body, start=1):
        if not isinstance(stmt, ast.Assert):
            raise TestSplitError(f"check's statement {i} is a {type(stmt).__name__}, not an assert")
        text = ast.get_source_segment(test, stmt) or ast.unparse(stmt)
        try:
            compile(text, "<test>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            text = ast.unparse(stmt)  # a segment that needs its indentation context
        out.append(text)
    if not out:
        raise TestSplitError("check holds no assert")
    return out


def make_problem(rec: dict[str, Any]) -> CodegenProblem:
    """The problem of one merged LeetCodeDataset record (:func:`codethinker.data.sources.load_leetcode`
    with ``extra=("test", "query")``); :class:`TestSplitError` / :class:`EntryPointError` /
    :class:`~codethinker.codegen.checks.CheckError` say why not."""
    parse_entry(rec["entry_point"])
    tests = split_tests(rec["test"])
    for t in tests:
        parse_check(t)  # the judge compares in the parent: a test in no judged form is a CheckError
    return CodegenProblem(
        id=rec["task_id"],
        question_id=rec.get("question_id"),
        difficulty=rec.get("difficulty"),
        version=rec["version"],
        prompt=f"{rec['query'].rstrip()}\n\n{ASK}",
        preamble=rec["preamble"],
        reference=rec["completion"],
        entry_point=rec["entry_point"].strip(),
        tests=tuple(tests),
    )
