"""The code-generation reward switch (grpo.task: codegen): each kind's batched score with the real sandbox
judge on tiny programs (one judge call per batch), the DBS prefix scores, CG-GRPO (its gate, prompt and
reward model path), verl's compute_score for the new kinds, and the task/reward validation of grpo's params."""

from __future__ import annotations

import json

import pytest

from codethinker.codegen.crpl import recode_prompt
from codethinker.codegen.reflexion import FORMAT_PROMPT, render_response
from codethinker.codegen.task import ASK, CodegenProblem
from codethinker.rewards import codegen_switch, verl_reward
from codethinker.rewards.codegen_switch import (
    code_prefix_score,
    codegen_spec,
    recode_prefix_score,
    reflexion_prefix_score,
)
from codethinker.rewards.switch import compute_score
from codethinker.training.grpo import check_task_reward, grpo_params

PROBLEM = CodegenProblem(
    id="add-one",
    question_id=1,
    difficulty="Easy",
    version="v0.2.0",
    prompt=f"Add one.\n\n{ASK}",
    preamble="from typing import *\n",
    reference="class Solution:\n    def add(self, x: int) -> int:\n        return x + 1\n",
    entry_point="Solution().add",
    tests=("assert candidate(1) == 2", "assert candidate(-1) == 0", "assert candidate(5) == 6"),
)
TRUTH = json.dumps(PROBLEM.to_json())
GOOD = PROBLEM.reference
WRONG = "class Solution:\n    def add(self, x):\n        return x\n"  # 0 of 3 tests
HALF = "class Solution:\n    def add(self, x):\n        return 2 if x == 1 else 0\n"  # tests 1 and 2 of 3
LIMITS = {"test_timeout_s": 1.0, "setup_timeout_s": 3.0, "workers": 2}


def fenced(code: str) -> str:
    return f"Plan.\n\n```python\n{code}```"


@pytest.fixture()
def judge_calls(monkeypatch):
    """The number of programs in each of the sandbox judge's batches."""
    calls = []
    real = codegen_switch.judge_programs

    def counting(problems, codes, limits=None):
        calls.append(len(codes))
        return real(problems, codes, limits)

    monkeypatch.setattr(codegen_switch, "judge_programs", counting)
    return calls


class TestCodegenOutcome:
    spec = codegen_spec("codegen_outcome", judge=LIMITS)

    def test_valid(self, judge_calls):
        [s] = self.spec.score_batch([fenced(GOOD)], [TRUTH])
        assert (s.score.reward, s.score.fmt, s.score.r_res, s.score.pass_rate, s.cycles) == (2.0, 1, 1.0, 1.0, None)
        assert judge_calls == [1]

    def test_invalid(self, judge_calls):
        scored = self.spec.score_batch(["no code at all", fenced("class Solution(:\n")], [TRUTH, PROBLEM])
        assert [s.score.reward for s in scored] == [0.0, 0.0]
        assert [s.score.reason for s in scored] == ["no_block", "syntax_error"]

    def test_mixed_batch_is_one_judge_call(self, judge_calls):
        texts = [fenced(GOOD), fenced(WRONG), fenced(HALF), f"```python\n{WRONG}```\n```python\n{GOOD}```", "junk"]
        scored = self.spec.score_batch(texts, [TRUTH] * 5)
        # R_fmt + R_out: right (1 + 1), wrong (1 + 0), 2 of 3 tests (1 + 0), two blocks with a right last
        # program (0 + 1), nothing (0 + 0)
        assert [s.score.reward for s in scored] == [2.0, 1.0, 1.0, 1.0, 0.0]
        assert [round(s.score.pass_rate, 4) for s in scored] == [1.0, 0.0, 0.6667, 1.0, 0.0]
        assert judge_calls == [5]  # one sandbox batch of 5 programs ("junk" parses: it is its own program)


class TestReflexiCoderKind:
    spec = codegen_spec("reflexicoder", judge=LIMITS)

    def test_valid(self, judge_calls):
        text = render_response("plan", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nadd one"])
        [s] = self.spec.score_batch([text], [TRUTH])
        # rates (0, 1): m_1 = tanh(10), R_traj = 1 + 0.5 tanh(10), E = 1 + 1/(1 + 1e-6);
        # R = 0.5 R_traj + E + 1 (the module's doctest: 3.749999)
        assert round(s.score.reward, 6) == 3.749999 and s.cycles == 1 and s.score.pass_rate == 1.0
        assert judge_calls == [2]

    def test_invalid(self):
        [s] = self.spec.score_batch([fenced(GOOD)], [TRUTH])  # one block, no reflection layout
        assert (s.score.reward, s.score.fmt, s.cycles) == (0.0, 0, 0)

    def test_mixed(self, judge_calls):
        texts = [
            render_response("p", [HALF, HALF, GOOD], ["STATUS: BUG_DETECTED\nx", "STATUS: BUG_DETECTED\ny"]),
            "junk",
            render_response("p", [GOOD, GOOD], ["STATUS: OPTIMIZATION_ONLY\nz"]),
        ]
        scored = self.spec.score_batch(texts, [TRUTH] * 3)
        assert [s.cycles for s in scored] == [2, 0, 1]
        assert scored[1].score.reward == 0.0 and scored[0].score.reward > 0 and scored[2].score.reward > 0
        # converged (1, 1): m = h_pos, R_traj = 1 + 0.5 * 0.05, E = 1; R = 0.5 * 1.025 + 1 + 1 (doctest: 2.5125)
        assert round(scored[2].score.reward, 6) == 2.5125
        assert judge_calls == [5]


def recode(code: str) -> str:
    return f"<think>Add one to x.</think>\n<answer>\n```python\n{code}```\n</answer>"


class TestCgGrpo:
    """The real judge and the real gate; the reward model is a stand-in with a fixed logit (the trained one is
    tested in tests/rewards/test_recode.py), so the expected totals are hand-computed: sigmoid(0) = 0.5."""

    @pytest.fixture
    def rm(self, monkeypatch):
        seen: list = []

        class _RM:
            def score(self, prompts, completions):
                seen.append((prompts, completions))
                return [0.0] * len(completions)

        monkeypatch.setattr(codegen_switch, "_process_model", lambda path: _RM())
        return seen

    @pytest.mark.parametrize(("kind", "want"), [("cg_grpo", [2.5, 1.0, 0.0]), ("cg_grpo_ungated", [2.5, 1.5, 0.5])])
    def test_gated_and_ungated(self, rm, kind, want):
        # right program: R_fmt 1 + R_out 1 + R_proc 0.5; wrong program in the format: 1 + 0 (+ 0.5 ungated);
        # junk: 0 + 0 (+ 0.5 ungated)
        scored = codegen_spec(kind, judge=LIMITS).score_batch([recode(GOOD), recode(WRONG), "junk"], [TRUTH] * 3)
        assert [s.score.reward for s in scored] == want
        assert [s.score.r_proc for s in scored] == [w - b for w, b in zip(want, [2.0, 1.0, 0.0], strict=True)]
        assert rm[0][0] == [recode_prompt(PROBLEM)] * 3  # the reward model reads ReCode's prompt

    def test_recode_outcome_is_the_format_and_the_outcome_without_the_model(self, rm):
        # right: 1 + 1; wrong program in the format: 1 + 0; junk: 0 + 0; the reward model is never asked
        scored = codegen_spec("recode_outcome", judge=LIMITS).score_batch(
            [recode(GOOD), recode(WRONG), "junk"], [TRUTH] * 3
        )
        assert [s.score.reward for s in scored] == [2.0, 1.0, 0.0]
        assert [s.score.r_proc for s in scored] == [0.0, 0.0, 0.0] and rm == []

    def test_codegen_eval_scores_a_cg_grpo_policy_in_recodes_format_without_the_model(self):
        from codethinker.training.codegen_eval import CodegenEvalParams

        for trained, measured in [
            ("cg_grpo", "recode_outcome"),
            ("cg_grpo_ungated", "recode_outcome"),
            ("codegen_outcome", "codegen_outcome"),
            ("reflexicoder", "reflexicoder"),
        ]:
            assert CodegenEvalParams(reward=trained).spec().kind == measured

    def test_the_policy_sees_recodes_prompt(self):
        assert codegen_spec("cg_grpo").prompt(PROBLEM) == [{"role": "user", "content": recode_prompt(PROBLEM)}]

    def test_an_untrained_reward_model_names_the_stage(self, tmp_path):
        spec = codegen_spec("cg_grpo", judge=LIMITS, reward_model=str(tmp_path / "none"))
        with pytest.raises(FileNotFoundError, match=r"dvc repro reward_model"):
            spec.score_batch([recode(GOOD)], [TRUTH])

    def test_verl_gets_the_reward_model_path(self):
        assert codegen_spec("cg_grpo", reward_model="rm/dir").kwargs()["reward_model"] == "rm/dir"
        assert "reward_model" not in codegen_spec("codegen_outcome").kwargs()

    def test_recode_prefixes(self):
        assert [
            recode_prefix_score(t, PROBLEM)
            for t in (
                "<thi",
                "<think>Plan.\n\n",
                "<think>Plan.</think>\n<ans",
                "<think>Plan.</think>\n<answer>\n```python\nclass Solution:\n",
            )
        ] == [1.0, 1.0, 1.0, 1.0]
        assert [
            recode_prefix_score(t, PROBLEM)
            for t in ("Sure, <think>", "<think></think><answer>", "<think>a</think>b", "<think>a<think>")
        ] == [0.0, 0.0, 0.0, 0.0]


class TestPrefixScores:
    def test_code_prefixes(self):
        assert code_prefix_score("I add one.\n\n", PROBLEM) == 1.0  # prose only
        assert code_prefix_score("```python\nclass Solution:\n    def add(self, x):\n", PROBLEM) == 1.0  # open block
        assert code_prefix_score(fenced(GOOD), PROBLEM) == 1.0
        assert code_prefix_score("```python\nclass Solution(:\n", PROBLEM) == 0.0  # does not parse
        assert code_prefix_score("```js\nlet x\n```", PROBLEM) == 0.0
        assert code_prefix_score(fenced("class Other:\n    pass\n"), PROBLEM) == 0.0  # closed without the entry
        assert code_prefix_score(fenced(GOOD) + "\n```python\nx = 1\n", PROBLEM) == 0.0  # a second block

    def test_reflexion_prefixes(self):
        first = f"<think>plan</think>\n<answer>\n```python\n{GOOD}```\n</answer>"
        assert reflexion_prefix_score(first, PROBLEM) == 1.0  # no reflection yet: allowed
        both = render_response("p", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nx"])
        assert reflexion_prefix_score(both, PROBLEM) == 1.0
        assert reflexion_prefix_score("<answer>```python\nx = 1\n```</answer>", PROBLEM) == 0.0  # no think
        no_entry = "<think>p</think><answer>\n```python\nx = 1\n```\n</answer>"
        assert reflexion_prefix_score(no_entry, PROBLEM) == 0.0

    def test_spec_blocks_and_prompts(self):
        outcome, reflexi = codegen_spec("codegen_outcome"), codegen_spec("reflexicoder")
        assert (outcome.block_stop, reflexi.block_stop, outcome.stop) == (["\n\n"], ["</answer>"], [])
        assert outcome.prompt(PROBLEM) == [{"role": "user", "content": PROBLEM.prompt}]
        [msg] = reflexi.prompt(PROBLEM)
        assert msg["content"] == f"Add one.\n\n{FORMAT_PROMPT}" and ASK not in msg["content"]
        assert outcome.prefix_scorer(TRUTH)("```python\nclass Solution(:\n") == 0.0


class TestVerlComputeScore:
    def test_codegen_outcome(self):
        out = compute_score("leetcode_codegen", fenced(HALF), TRUTH, None, reward="codegen_outcome", judge=LIMITS)
        assert (out["score"], out["fmt"], out["r_res"], round(out["pass_rate"], 4)) == (1.0, 1, 0.0, 0.6667)

    def test_reflexicoder_through_verls_entry_file(self):
        text = render_response("plan", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nadd one"])
        out = verl_reward.compute_score("leetcode_codegen", text, TRUTH, {}, reward="reflexicoder", judge=LIMITS)
        assert round(out["score"], 6) == 3.749999 and out["cycles"] == 1 and out["answer_ok"] == 1

    def test_kind_from_extra_info_and_settings(self):
        info = {"reward": "reflexicoder", "reflexicoder": {"xi": 0.0}, "judge": LIMITS}
        out = compute_score("leetcode_codegen", "junk", TRUTH, info)
        assert (out["score"], out["fmt"], out["cycles"]) == (0.0, 0, 0)
        with pytest.raises(ValueError, match="reflexicoder"):
            compute_score("leetcode_codegen", "junk", TRUTH, {**info, "reflexicoder": {"xii": 1}})


class TestTaskRewardValidation:
    @pytest.mark.parametrize("reward", ["crm", "orm", "whitebox"])
    def test_reasoning_reward_with_codegen_task(self, reward):
        with pytest.raises(
            ValueError, match=rf"grpo_codegen\.reward={reward} is a reward of task output_prediction \(grpo\.reward's\)"
        ):
            grpo_params({"task": "codegen", "reward": reward})

    def test_codegen_reward_with_reasoning_task(self):
        with pytest.raises(ValueError, match=r"grpo\.reward=reflexicoder is a reward of task codegen \(grpo_codegen"):
            grpo_params({"reward": "reflexicoder"})

    def test_unknown_task_and_reward(self):
        with pytest.raises(
            ValueError, match=r"unknown task 'codgen': one of output_prediction, codegen, or package.module:attribute"
        ):
            check_task_reward("codgen", "crm")
        with pytest.raises(ValueError, match=r"grpo_codegen\.reward must be one of codegen_outcome, .*got 'outcome'"):
            grpo_params({"task": "codegen", "reward": "outcome"})

    def test_valid_pairs_and_settings(self):
        p = grpo_params({"task": "codegen", "reward": "reflexicoder", "reflexicoder": {"n0": 3}})
        assert (p.reward_spec().kind, p.reward_spec().format) == ("reflexicoder", "reflexion")
        with pytest.raises(ValueError, match=r"grpo\.reflexicoder"):
            grpo_params({"task": "codegen", "reward": "reflexicoder", "reflexicoder": {"n00": 3}})
        with pytest.raises(ValueError, match="judge"):
            grpo_params({"task": "codegen", "reward": "codegen_outcome", "judge": {"test_timeout": 1}})
