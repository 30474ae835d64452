"""The outcome reward's oracle: every training problem's reference solution passes its tests (or is
listed with its reason); the stages' library calls on a slice of the real data."""

from __future__ import annotations

import pytest

from codethinker.codegen.judge import JudgeLimits, check_references


@pytest.mark.needs_shared
def test_references_of_a_slice_pass(leetcode_problems):
    res = check_references(leetcode_problems[:30], JudgeLimits(workers=2))
    assert res["checked"] == 30 and res["passed"] == 30, res["failures"]


# the references that fail, with the reason (docs/codegen.md "The oracle")
KNOWN_FAILURES = {
    "word-ladder-ii": "test 1 compares the ladders in one order; the reference's order follows set iteration "
    "over strings, i.e. str hashing, and the sandbox's PYTHONHASHSEED=0 gives the other order",
}


@pytest.mark.slow
@pytest.mark.needs_shared
def test_references_of_all_training_problems(leetcode_problems):
    """All 1,890 merged training problems (before decontamination): every reference passes but the
    listed ones, each failing only on the test its reason names."""
    res = check_references(leetcode_problems, JudgeLimits())
    assert res["checked"] == len(leetcode_problems) == 1890
    failed = {f["id"]: f for f in res["failures"]}
    assert set(failed) == set(KNOWN_FAILURES), [f"{f['id']}: {f['status']}: {f['detail']}" for f in failed.values()]
    assert failed["word-ladder-ii"]["tests"] == ["fail", "pass"]
    assert res["passed"] == 1889
