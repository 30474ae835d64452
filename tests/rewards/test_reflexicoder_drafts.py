"""ReflexiCoder's reward pays a wrong first draft fixed in revision more than a right answer kept right; the
figures docs/reflexicoder.md states are the function's, and codegen_eval reports how a policy's first draft
and last answer fare (does it sandbag its first draft?)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pytest import approx

from codethinker.codegen.reflexion import render_response
from codethinker.rewards.reflexicoder import DRAFT_METRICS, draft_outcomes, reflexicoder_score
from codethinker.training import codegen_eval
from codethinker.training.codegen_eval import CodegenEvalParams, run_codegen_eval

from ..training.test_grpo_codegen import GOOD, LIMITS, WRONG, _Engine, problem

DOC = Path(__file__).resolve().parents[2] / "docs" / "reflexicoder.md"


def _score(rates):
    n = len(rates) - 1
    text = render_response("plan", [f"x = {i}\n" for i in range(n + 1)], ["STATUS: BUG_DETECTED\nwhy"] * n)
    return reflexicoder_score(text, rates)


def test_a_fixed_wrong_draft_is_paid_more_than_a_right_answer_kept_right():
    fixed, right = _score([0.0, 1.0]), _score([1.0, 1.0])
    assert fixed.reward == approx(3.749999, abs=1e-6) and right.reward == 2.5125
    assert fixed.reward - right.reward == approx(1.2375, abs=1e-5)
    # the gap: E's improvement term (r_n - r_0) / (1 + 1e-6) and tanh(10) in place of h_pos in R_traj
    assert fixed.efficiency - right.efficiency == approx(1.0, abs=1e-5)
    assert 0.5 * (fixed.r_traj - right.r_traj) == approx(0.2375, abs=1e-5)


def _doc_table() -> list[tuple[list[float], float, float, float]]:
    rows = []
    for line in DOC.read_text().splitlines():
        m = re.fullmatch(r"\| \[([\d., ]+)\] \| [^|]+ \| (-?[\d.]+) \| (-?[\d.]+) \| (-?[\d.]+) \|", line)
        if m:
            rows.append(([float(x) for x in m[1].split(",")], float(m[2]), float(m[3]), float(m[4])))
    return rows


def test_the_figures_docs_reflexicoder_md_states_are_the_functions():
    rows = _doc_table()
    assert len(rows) >= 8 and [1.0, 1.0] in [r[0] for r in rows] and [0.0, 1.0] in [r[0] for r in rows]
    for rates, r_traj, eff, total in rows:
        s = _score(rates)
        assert (s.r_traj, s.efficiency, s.reward) == (
            approx(r_traj, abs=5e-5),
            approx(eff, abs=5e-5),
            approx(total, abs=5e-5),
        ), rates


@pytest.mark.parametrize(
    ("rates", "want"),
    [
        ([0.0, 1.0], (0, 1, 0, 0)),
        ([1.0, 1.0], (1, 0, 1, 0)),
        ([1.0, 0.0], (1, 0, 0, 1)),
        ([0.5, 0.99], (0, 0, 0, 0)),
        ([0.0, 0.5, 1.0], (0, 1, 0, 0)),  # the last answer is the one that counts
        ([], (0, 0, 0, 0)),  # a broken response
    ],
)
def test_draft_outcomes(rates, want):
    assert draft_outcomes(rates) == dict(zip(DRAFT_METRICS, map(float, want), strict=True))


def test_codegen_eval_reports_whether_a_policy_sandbags_its_first_draft(monkeypatch, tmp_path):
    """Four held-out problems, one answer each through the real judge: a sandbagged draft (wrong, then fixed),
    a right answer kept right, a right answer broken in revision, and a broken response."""
    heldout = [problem(i, "heldout") for i in range(4)]
    texts = [
        render_response("p", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nx"]),
        render_response("p", [GOOD, GOOD], ["STATUS: OPTIMIZATION_ONLY\ny"]),
        render_response("p", [GOOD, WRONG], ["STATUS: BUG_DETECTED\nz"]),
        "junk",
    ]
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    monkeypatch.setattr("codethinker.training.train_eval.open_eval_engine", lambda path, p, seqs: _Engine(texts))
    out = run_codegen_eval(
        {"after_grpo": str(model)}, heldout, CodegenEvalParams(reward="reflexicoder", judge=LIMITS, max_tokens=64)
    )
    g = out["after_grpo"]
    assert (g["pass1"], g["first_pass1"], g["fail_then_pass"], g["pass_then_pass"], g["pass_then_fail"]) == (
        0.5,
        0.5,
        0.25,
        0.25,
        0.25,
    )
    assert all(f"{k}_ci_low" in g and f"{k}_ci_high" in g for k in DRAFT_METRICS)
    per = codegen_eval.score_answers(
        CodegenEvalParams(reward="codegen_outcome", judge=LIMITS).spec(), heldout[:1], [[]]
    )
    assert not set(DRAFT_METRICS) & set(per[0])  # one-block formats have one answer: no drafts to compare


def test_a_grpo_step_logs_the_draft_outcomes_on_both_backends():
    import json

    from codethinker.rewards.verl_reward import compute_score
    from codethinker.training.grpo import grpo_params
    from codethinker.training.reward_func import RewardFunc

    truth = json.dumps(problem(0).to_json())
    texts = [
        render_response("p", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nx"]),
        render_response("p", [GOOD, GOOD], ["STATUS: OPTIMIZATION_ONLY\ny"]),
    ]
    f = RewardFunc.from_params(grpo_params({"task": "codegen", "reward": "reflexicoder", "judge": LIMITS}))
    f(None, texts, [truth] * 2, rollout_kind=["regular", "dbs"])
    stats = f.take()  # local backend: the step's means
    assert {k: stats[k] for k in DRAFT_METRICS} == {
        "first_pass1": 0.5,
        "fail_then_pass": 0.5,
        "pass_then_pass": 0.5,
        "pass_then_fail": 0.0,
    }
    verl = compute_score("leetcode_codegen", texts[0], truth, {}, reward="reflexicoder", judge=LIMITS)
    assert {k: verl[k] for k in DRAFT_METRICS} == draft_outcomes([0.0, 1.0])  # verl averages them per step
