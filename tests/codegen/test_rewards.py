"""rewards.codegen: the outcome reward, the format reward and pass@k, each with valid, invalid and mixed
completions (the outcome through the real sandbox judge)."""

from __future__ import annotations

import pytest

from codethinker.codegen.judge import JudgeLimits, Judgement
from codethinker.rewards.codegen import (
    format_rewards,
    format_score,
    outcome_rewards,
    outcome_score,
    outcome_scores,
    pass_at,
)

from .conftest import fenced

GOOD = "class Solution:\n    def add(self, x: int) -> int:\n        return x + 1\n"
HALF = "class Solution:\n    def add(self, x):\n        return 2 if x == 1 else 0\n"  # passes tests 1 and 2 of 3
WRONG = "class Solution:\n    def add(self, x):\n        return x\n"
LIMITS = JudgeLimits(test_timeout_s=1.0, setup_timeout_s=3.0, workers=2)


class TestOutcomeReward:
    def test_valid(self, add_problem):
        [s] = outcome_scores([fenced(GOOD)], [add_problem], LIMITS)
        assert (s.reward, s.answer_ok, s.pass_rate, s.fmt, s.reason) == (1.0, 1, 1.0, 1, None)

    def test_invalid(self, add_problem):
        texts = [fenced(WRONG), "no code at all", fenced("class Solution:\n    def add(self, x)\n")]
        scores = outcome_scores(texts, [add_problem] * 3, LIMITS)
        assert [s.reward for s in scores] == [0.0, 0.0, 0.0]
        assert [s.reason for s in scores] == ["fail", "no_program", "error"]
        assert scores[0].pass_rate == 0.0 and scores[0].fmt == 1

    def test_mixed(self, add_problem):
        texts = [fenced(GOOD), fenced(HALF), GOOD, fenced(WRONG)]  # GOOD bare: passes, badly formatted
        scores = outcome_scores(texts, [add_problem] * 4, LIMITS)
        assert [s.reward for s in scores] == [1.0, 0.0, 1.0, 0.0]
        assert [round(s.pass_rate, 3) for s in scores] == [1.0, 0.667, 1.0, 0.0]
        assert [s.fmt for s in scores] == [1, 1, 0, 1]
        assert outcome_rewards(texts[:1], [add_problem], LIMITS) == [1.0]

    def test_pure_on_a_judgement(self, add_problem):
        s = outcome_score(fenced(GOOD), add_problem, Judgement("timeout", (), 3, "exceeded"))
        assert s.reward == 0.0 and s.reason == "timeout" and s.pass_rate == 0.0
        assert dict(s)["pass_rate"] == 0.0 and "wb_acc" not in dict(s)

    def test_lengths_must_match(self, add_problem):
        with pytest.raises(ValueError):
            outcome_scores([GOOD, GOOD], [add_problem], LIMITS)


class TestFormatReward:
    def test_valid(self, add_problem):
        assert format_score(fenced(GOOD), add_problem).reward == 1.0

    def test_invalid(self, add_problem):
        bad = [GOOD, fenced(GOOD) * 2, fenced(GOOD, "js"), fenced("def add(x): ...\n")]
        assert [format_score(t, add_problem).reason for t in bad] == [
            "no_block",
            "several_blocks",
            "not_python",
            "no_entry_point",
        ]
        assert format_rewards(bad, [add_problem] * 4) == [0.0] * 4

    def test_mixed(self, add_problem):
        assert format_rewards([fenced(WRONG), GOOD, fenced(GOOD)], [add_problem] * 3) == [1.0, 0.0, 1.0]


class TestPassAtK:
    def test_valid(self):
        assert pass_at([[True, True], [True, False]], 1) == 0.75
        assert pass_at([[True, False, False]], 3) == 1.0

    def test_invalid(self):
        with pytest.raises(ValueError):
            pass_at([], 1)
        with pytest.raises(ValueError, match="fewer than k"):
            pass_at([[True]], 2)

    def test_mixed(self):
        assert pass_at([[False] * 4, [True] * 4, [True, False, False, False]], 1) == pytest.approx((0 + 1 + 0.25) / 3)
