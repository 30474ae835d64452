"""rewards.recode: ReCode's format check, the CG-GRPO reward and its ungated ablation (valid, invalid and
mixed completions against known judgements and reward-model scores), and the gate as a property: a program
that fails never receives R_proc, whatever the reward model says."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codethinker.codegen.judge import Judgement
from codethinker.codegen.task import CodegenProblem
from codethinker.rewards.recode import cg_rewards, cg_score, cg_scores, process_reward, recode_format, recode_program

PROBLEM = CodegenProblem(
    "add-one", 1, "Easy", "v0.2.0", "Add one.", "", "", "Solution().add", ("assert candidate(x = 1) == 2",)
)
CODE = "class Solution:\n    def add(self, x: int) -> int:\n        return x + 1\n"
GOOD = f"<think>\nReturn x + 1.\n</think>\n<answer>\n```python\n{CODE}```\n</answer>"
PASS, FAIL = Judgement("pass", ("pass",), 1), Judgement("fail", ("fail",), 1, "test 1: fail")
LN3 = math.log(3.0)  # sigmoid(ln 3) = 3/4


class TestRecodeFormat:
    def test_valid(self):
        assert recode_format(GOOD, PROBLEM.entry_point) == (True, None)
        assert recode_program(GOOD) == CODE

    def test_invalid(self):
        cases = {
            f"```python\n{CODE}```": "no_think_answer",  # codegen's format, not ReCode's
            f"<think> </think><answer>\n```python\n{CODE}```\n</answer>": "empty_think",
            "<think>x</think><answer>no code</answer>": "no_block",
            f"<think>x</think><answer>\n```python\n{CODE}```\n```python\n{CODE}```\n</answer>": "several_blocks",
            f"<think>x</think><answer>\n```python\n{CODE}```\n</answer> trailing": "no_think_answer",
            f"<think>x</think><think>y</think><answer>\n```python\n{CODE}```\n</answer>": "no_think_answer",
            "<think>x</think><answer>\n```python\nclass Solution:\n    def sub(self): pass\n```\n</answer>": (
                "no_entry_point"
            ),
        }
        for text, reason in cases.items():
            assert recode_format(text, PROBLEM.entry_point) == (False, reason), text

    def test_mixed(self):
        texts = [GOOD, GOOD.replace("<think>", ""), GOOD + "\n"]  # trailing whitespace is allowed
        assert [recode_format(t, PROBLEM.entry_point)[0] for t in texts] == [True, False, True]


class TestProcessReward:
    def test_valid(self):
        assert process_reward(0.0) == 0.5
        assert process_reward(LN3) == pytest.approx(0.75)
        assert process_reward(-LN3) == pytest.approx(0.25)

    def test_invalid(self):
        with pytest.raises(ValueError, match="NaN"):
            process_reward(float("nan"))

    def test_mixed(self):  # no overflow at the extremes
        assert [process_reward(x) for x in (-1000.0, 1000.0)] == [0.0, 1.0]


class TestCGGRPO:
    def test_valid(self):  # 1 (format) + 1 (tests) + 3/4 (process)
        s = cg_score(GOOD, PROBLEM, PASS, rm_score=LN3)
        assert (s.fmt, s.r_res, s.r_proc, s.reward, s.answer_ok, s.reason) == (1, 1.0, 0.75, 2.75, 1, None)
        assert s.pass_rate == 1.0

    def test_invalid(self):  # a failing program: no R_proc however high the score
        s = cg_score(GOOD, PROBLEM, FAIL, rm_score=50.0)
        assert (s.fmt, s.r_res, s.r_proc, s.reward, s.answer_ok, s.reason) == (1, 0.0, 0.0, 1.0, 0, "fail")
        bad = cg_score("no tags " + GOOD, PROBLEM, PASS, rm_score=LN3)  # passes, badly formatted: 0 + 1 + 3/4
        assert (bad.fmt, bad.reward, bad.reason) == (0, 1.75, "no_think_answer")

    def test_mixed(self):
        completions = [GOOD, GOOD, "plain text", GOOD]
        verdicts = [PASS, FAIL, Judgement("no_program", (), 1), PASS]
        scores = [LN3, LN3, 9.0, -LN3]
        assert cg_rewards(completions, [PROBLEM] * 4, verdicts, scores) == [2.75, 1.0, 0.0, 2.25]
        with pytest.raises(ValueError):
            cg_scores(completions, [PROBLEM] * 3, verdicts, scores)


class TestUngated:
    def test_valid(self):
        assert cg_score(GOOD, PROBLEM, PASS, rm_score=LN3, gated=False).reward == 2.75

    def test_invalid(self):  # the ablation pays the process term to a failing program
        s = cg_score(GOOD, PROBLEM, FAIL, rm_score=LN3, gated=False)
        assert (s.r_proc, s.reward) == (0.75, 1.75)

    def test_mixed(self):
        verdicts = [PASS, FAIL, FAIL]
        got = cg_rewards([GOOD] * 3, [PROBLEM] * 3, verdicts, [0.0, 0.0, -LN3], gated=False)
        assert got == [2.5, 1.5, 1.25]


_verdicts = st.sampled_from(
    [PASS, FAIL, Judgement("fail", ("pass", "fail"), 2), Judgement("timeout"), Judgement("no_program")]
)


@given(st.lists(st.tuples(_verdicts, st.floats(-1e6, 1e6), st.booleans()), min_size=1, max_size=8))
def test_the_gate_pays_no_process_reward_to_a_failing_program(rows):
    completions = [GOOD if fmt else "```python\nx\n```" for _, _, fmt in rows]
    verdicts = [v for v, _, _ in rows]
    rm = [s for _, s, _ in rows]
    for s, v, score in zip(cg_scores(completions, [PROBLEM] * len(rows), verdicts, rm), verdicts, rm, strict=True):
        if not v.ok:
            assert s.r_proc == 0.0 and s.reward == s.fmt  # R_out = 0 and nothing else
        else:
            assert s.r_res == 1.0 and s.reward == pytest.approx(s.fmt + 1.0 + process_reward(score), abs=1e-6)
        assert 0.0 <= s.r_proc <= 1.0
