"""ReflexiCoder's reward: each component and the total, by hand, for the six trajectories of docs/reflexicoder.md
(improving, stagnating below the maximum, converged at the maximum, degrading, too many cycles, broken
format); valid, invalid and mixed batches; the config; the pass rates through the real judge.

Default coefficients (ReflexiConfig): n0 5, alpha 0.1, beta 2, gamma 0.05, delta 0.1, decay offset 3,
lambda 0.2, s 0.1, eps 1e-4, h_pos 0.05, h_neg 1, r_max 1, eta 0.5, epsilon 1e-6, phi 0.5, psi 1, xi 1.
Constants used below (8+ digits):
  w for n = 2:  w_1 = e^0.2 / (e^0.2 + e^0.4) = 1 / (1 + e^0.2) = 1 / 2.221402758 = 0.4501660027, w_2 = 0.5498339973
  tanh(2.5) = 0.9866142982, tanh(7.5) = 0.9999993882, e^-0.15 = 0.8607079764
"""

from __future__ import annotations

import doctest
import math

import pytest

from codethinker.codegen.judge import JudgeLimits
from codethinker.codegen.reflexion import parse_response, render_response
from codethinker.codegen.task import CodegenProblem
from codethinker.rewards import reflexicoder
from codethinker.rewards.reflexicoder import (
    ReflexiConfig,
    answer_pass_rates,
    cycle_regulation,
    efficiency_reward,
    improvement_signals,
    reflexicoder_rewards,
    reflexicoder_score,
    reflexicoder_scores,
    time_weights,
    trajectory_reward,
)

CFG = ReflexiConfig()
IMPROVING = (0.0, 0.25, 1.0)
STAGNATING = (0.5, 0.5, 0.5)
CONVERGED = (1.0, 1.0)
DEGRADING = (1.0, 0.75)
TOO_MANY = (1.0,) * 7  # n = 6 > n0
BROKEN = "<think>plan</think><answer>```python\nx = 1\n```</answer>"  # no reflection: F = 0


def response(n: int) -> str:
    """A well-formed response with ``n`` cycles."""
    return render_response("plan", [f"x = {k}" for k in range(n + 1)], ["STATUS: BUG_DETECTED\nfix"] * n)


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-9)


class TestCycleRegulation:
    def test_full_pay_up_to_n0(self):
        assert [cycle_regulation(n) for n in range(1, 6)] == [1.0] * 5

    def test_no_cycle_pays_nothing(self):
        assert cycle_regulation(0) == 0.0 and cycle_regulation(-1) == 0.0

    def test_decay_beyond_n0(self):
        # n = 6, k = 3: 1/(1 + 0.1*9) * e^-0.15 * (1 - 0.1*sin(3pi/2)) = 0.5263157895 * 0.8607079764 * 1.1
        assert cycle_regulation(6) == approx(0.4983046179)
        # n = 7, k = 4: 1/(1 + 0.1*16) * e^-0.2 * (1 - 0.1*sin(2pi)) = 0.3846153846 * 0.8187307531 * 1
        assert cycle_regulation(7) == approx(0.3148964435)
        # n = 8, k = 5: 1/(1 + 0.1*25) * e^-0.25 * (1 - 0.1*sin(5pi/2)) = 0.2857142857 * 0.7788007831 * 0.9
        assert cycle_regulation(8) == approx(0.2002630585)

    def test_offset_n0_makes_it_continuous(self):
        cfg = ReflexiConfig(decay_offset=5)
        # n = 6, k = 1: 1/(1 + 0.1) * e^-0.05 * (1 - 0.1*sin(pi/2)) = 0.9090909091 * 0.9512294245 * 0.9
        assert cycle_regulation(6, cfg) == approx(0.7782786200)
        assert cycle_regulation(5, cfg) == 1.0

    def test_huge_n_is_finite(self):
        assert 0.0 <= cycle_regulation(10**6) < 1e-20


class TestTimeWeights:
    def test_two_steps(self):
        assert time_weights(2, 0.2) == [approx(0.4501660027), approx(0.5498339973)]

    def test_later_steps_weigh_more_and_sum_to_one(self):
        w = time_weights(6, 0.2)  # e^0.2t / sum: 0.0954, 0.1166, 0.1424, 0.1739, 0.2124, 0.2594
        assert w[0] == approx(0.0954274140) and w[5] == approx(0.2593986055)
        assert sum(w) == approx(1.0) and w == sorted(w)

    def test_lambda_zero_is_uniform_and_large_lambda_does_not_overflow(self):
        assert time_weights(4, 0.0) == [0.25] * 4
        assert time_weights(3, 1000.0) == [0.0, 0.0, 1.0]


class TestImprovementSignal:
    def test_improving(self):
        # d = 0.25, 0.75: tanh(0.25/0.1), tanh(0.75/0.1)
        assert improvement_signals(IMPROVING) == [approx(0.9866142982), approx(0.9999993882)]

    def test_stagnating_below_max(self):
        assert improvement_signals(STAGNATING) == [-1.0, -1.0]  # -h_neg twice

    def test_converged_at_max(self):
        assert improvement_signals(CONVERGED) == [0.05]  # +h_pos

    def test_degrading(self):
        assert improvement_signals(DEGRADING) == [approx(-0.9866142982)]  # -tanh(0.25/0.1)

    def test_changes_within_eps_are_no_change(self):
        # d = 5e-5 <= eps: no change; r_0 = 0.99995 is within eps of r_max: converged
        assert improvement_signals((0.99995, 1.0)) == [0.05]
        assert improvement_signals((0.3, 0.30005)) == [-1.0]


class TestTrajectoryReward:
    def test_improving(self):
        # 1.0 + 0.5 * (0.4501660027*0.9866142982 + 0.5498339973*0.9999993882)
        # = 1.0 + 0.5 * (0.4441402150 + 0.5498336609) = 1.0 + 0.5 * 0.9939738759 = 1.4969869379
        assert trajectory_reward(IMPROVING) == approx(1.4969869379)

    def test_stagnating_below_max(self):
        assert trajectory_reward(STAGNATING) == approx(0.0)  # 0.5 + 0.5 * (-1 * (w_1 + w_2)) = 0.5 - 0.5

    def test_converged_at_max(self):
        assert trajectory_reward(CONVERGED) == approx(1.025)  # 1.0 + 0.5 * 1 * 0.05

    def test_degrading(self):
        assert trajectory_reward(DEGRADING) == approx(0.2566928509)  # 0.75 + 0.5 * -0.9866142982

    def test_terminal_solved_is_the_seeds_indicator(self):
        solved = ReflexiConfig(terminal="solved")
        assert trajectory_reward(DEGRADING, solved) == approx(-0.4933071491)  # [0.75 >= 1] = 0, + 0.5 * -0.98661
        assert trajectory_reward(CONVERGED, solved) == approx(1.025)

    def test_needs_a_cycle(self):
        with pytest.raises(ValueError, match="n >= 1, got 1 score"):
            trajectory_reward((1.0,))


class TestEfficiencyReward:
    def test_improving(self):
        assert efficiency_reward(IMPROVING) == approx(1.499999000001)  # 1.0/2 + (1.0 - 0.0)/(max(1, 1) + 1e-6)

    def test_stagnating_below_max(self):
        assert efficiency_reward(STAGNATING) == approx(0.25)  # 0.5/2 + 0/(1 + 1e-6)

    def test_converged_at_max(self):
        assert efficiency_reward(CONVERGED) == approx(1.0)  # 1.0/1 + 0

    def test_degrading(self):
        assert efficiency_reward(DEGRADING) == approx(0.50000025)  # 0.75/1 + (-0.25)/(1 + 1e-6)

    def test_too_many_cycles(self):
        assert efficiency_reward(TOO_MANY) == approx(1 / 6)  # 1.0/6 + 0/(5 + 1e-6)

    def test_terminal_solved(self):
        solved = ReflexiConfig(terminal="solved", tau_q=0.7)
        assert efficiency_reward(DEGRADING, solved) == approx(
            0.75000025
        )  # [0.75 >= 0.7]/1 - 0.25/(1 + 1e-6) = 1 - 0.24999975
        assert efficiency_reward(STAGNATING, solved) == approx(0.0)  # [0.5 >= 0.7]/2 + 0


class TestTotal:
    """R = F * (0.5 * P * R_traj + 1.0 * P * E + 1.0) with the components above."""

    def total(self, rates: tuple[float, ...], cfg: ReflexiConfig = CFG) -> float:
        return reflexicoder_score(response(len(rates) - 1), rates, cfg).reward

    def test_improving(self):
        # 0.5 * 1 * 1.4969869379 + 1 * 1.499999000001 + 1 = 0.7484934690 + 2.499999000001
        assert self.total(IMPROVING) == approx(3.2484924690)

    def test_stagnating_below_max(self):
        assert self.total(STAGNATING) == approx(1.25)  # 0.5 * 0 + 0.25 + 1

    def test_converged_at_max(self):
        assert self.total(CONVERGED) == approx(2.5125)  # 0.5 * 1.025 + 1.0 + 1

    def test_degrading(self):
        # 0.5 * 0.2566928509 + 0.50000025 + 1 = 0.1283464255 + 1.50000025
        assert self.total(DEGRADING) == approx(1.6283466755)

    def test_too_many_cycles(self):
        # P(6) = 0.4983046179; R_traj = 1.025 (all converged, weights sum to 1); E = 1/6
        # 0.5 * 0.4983046179 * 1.025 + 0.4983046179 * 0.1666666667 + 1 = 0.2553811167 + 0.0830507697 + 1
        assert self.total(TOO_MANY) == approx(1.3384318864)

    def test_too_many_cycles_unregulated_efficiency(self):
        cfg = ReflexiConfig(regulate_efficiency=False)
        assert self.total(TOO_MANY, cfg) == approx(1.4220477834)  # 0.2553811167 + 1/6 + 1

    def test_broken_format(self):
        s = reflexicoder_score(BROKEN, [1.0])
        assert (s.reward, s.cycles, s.p_n, s.r_traj, s.efficiency) == (0.0, 0, 0.0, 0.0, 0.0)
        assert dict(s.score) == {
            "fmt": 0,
            "r_proc": 0.0,
            "r_res": 0.0,
            "reward": 0.0,
            "rcs": 0.0,
            "reason": "no_reflection",
            "answer_ok": 0,
        }

    def test_score_parts(self):
        s = reflexicoder_score(parse_response(response(2)), IMPROVING)
        assert s.score.fmt == 1 and s.score.reason is None and s.score.answer_ok == 1
        assert s.score.r_proc == approx(0.7484934690) and s.score.r_res == approx(1.499999000001)
        assert s.score.pass_rate == 1.0 and s.pass_rates == IMPROVING and s.cycles == 2
        assert s.log() == {
            "reward": s.reward,
            "fmt": 1.0,
            "cycles": 2.0,
            "p_n": 1.0,
            "r_traj": s.r_traj,
            "efficiency": s.efficiency,
            "pass_first": 0.0,
            "pass_last": 1.0,
        }
        assert reflexicoder_score(response(1), DEGRADING).score.answer_ok == 0

    def test_weights_phi_psi_xi(self):
        cfg = ReflexiConfig(phi=2.0, psi=0.0, xi=0.5)
        assert self.total(CONVERGED, cfg) == approx(2.55)  # 2 * 1.025 + 0 * 1.0 + 0.5


class TestBatch:
    def test_valid(self):
        got = reflexicoder_rewards([response(1), response(2)], [CONVERGED, IMPROVING])
        assert got == [approx(2.5125), approx(3.2484924690)]

    def test_invalid(self):
        texts = [BROKEN, "", "junk", response(1) + "junk"]
        scores = reflexicoder_scores(texts, [[1.0], [], [0.5, 0.5], [1.0, 1.0]])  # rates of broken rows not read
        assert [s.reward for s in scores] == [0.0] * 4
        assert [s.score.reason for s in scores] == ["no_reflection", "empty", "text_outside_tags", "text_outside_tags"]

    def test_mixed(self):
        texts = [response(1), BROKEN, response(6), response(1)]
        got = reflexicoder_rewards(texts, [DEGRADING, [], TOO_MANY, CONVERGED])
        assert got == [approx(1.6283466755), 0.0, approx(1.3384318864), approx(2.5125)]

    def test_rows_must_fit_their_answers(self):
        with pytest.raises(ValueError, match="row 1: pass_rates has 2 value"):
            reflexicoder_rewards([response(1), response(2)], [CONVERGED, CONVERGED])
        with pytest.raises(ValueError, match=r"row 0: pass_rates\[1\] must be a number in \[0, 1\], got 1.5"):
            reflexicoder_rewards([response(1)], [[1.0, 1.5]])
        for bad in (math.nan, True, "1"):
            with pytest.raises(ValueError, match="must be a number"):
                reflexicoder_rewards([response(1)], [[1.0, bad]])
        with pytest.raises(ValueError, match="2 completions but 1 rows"):
            reflexicoder_rewards([response(1), response(1)], [CONVERGED])

    def test_doctests(self):
        assert doctest.testmod(reflexicoder).failed == 0


class TestConfig:
    def test_defaults_are_the_papers(self):
        c = CFG
        assert (c.alpha, c.beta, c.gamma, c.delta, c.n0, c.lam, c.eta) == (0.1, 2.0, 0.05, 0.1, 5, 0.2, 0.5)
        assert (c.s, c.eps, c.h_pos, c.h_neg, c.r_max, c.epsilon) == (0.1, 1e-4, 0.05, 1.0, 1.0, 1e-6)
        assert (c.phi, c.psi, c.xi, c.decay_offset, c.terminal, c.regulate_efficiency) == (
            0.5,
            1.0,
            1.0,
            3,
            "score",
            True,
        )

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"n0": 0}, "n0 must be an integer >= 1"),
            ({"n0": 5.0}, "n0 must be an integer"),
            ({"decay_offset": -1}, "decay_offset must be an integer >= 0"),
            ({"alpha": -0.1}, "alpha must be a finite number >= 0"),
            ({"eta": math.inf}, "eta must be a finite"),
            ({"phi": "0.5"}, "phi must be a finite"),
            ({"s": 0.0}, "s must be > 0"),
            ({"terminal": "last"}, "terminal must be one of score, solved"),
            ({"regulate_efficiency": 1}, "regulate_efficiency must be true or false"),
        ],
    )
    def test_invalid(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            ReflexiConfig(**kwargs)


PREAMBLE = "from typing import *\n"
PROBLEM = CodegenProblem(
    id="add-one",
    question_id=1,
    difficulty="Easy",
    version="v0.2.0",
    prompt="Add one.",
    preamble=PREAMBLE,
    reference="class Solution:\n    def add(self, x: int) -> int:\n        return x + 1\n",
    entry_point="Solution().add",
    tests=("assert candidate(1) == 2", "assert candidate(-1) == 0", "assert candidate(5) == 6"),
)
WRONG = "class Solution:\n    def add(self, x):\n        return x\n"
HALF = "class Solution:\n    def add(self, x):\n        return 2 if x == 1 else 0\n"  # tests 1 and 2 of 3
GOOD = PROBLEM.reference


class TestPassRates:
    def test_every_answer_judged_in_one_batch(self):
        texts = [
            render_response("p", [WRONG, HALF, GOOD], ["STATUS: BUG_DETECTED\nx", "STATUS: BUG_DETECTED\ny"]),
            BROKEN,
            render_response("p", [GOOD, "class Solution:\n    def add(self, x)\n"], ["STATUS: OPTIMIZATION_ONLY\nz"]),
        ]
        limits = JudgeLimits(test_timeout_s=1.0, setup_timeout_s=3.0, workers=2)
        rates = answer_pass_rates(texts, [PROBLEM] * 3, limits)
        assert [[round(r, 4) for r in row] for row in rates] == [[0.0, 0.6667, 1.0], [], [1.0, 0.0]]
        rewards = reflexicoder_rewards(texts, rates)
        assert rewards[1] == 0.0 and rewards[0] > rewards[2]
