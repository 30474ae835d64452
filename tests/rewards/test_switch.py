"""The reward as a switch (grpo.reward): each kind routed to its SPEC value (§4 CRM, §8 CodeReasoner and
ExecVerify) on valid, invalid and mixed batches, with its own prompt format, and verl's entry point."""

from __future__ import annotations

import dataclasses
import re

import pytest

from codethinker.contra.render import render_prompt, render_trace, vanilla_prompt
from codethinker.rewards import verl_reward
from codethinker.rewards.crm import crm_score
from codethinker.rewards.score import Score
from codethinker.rewards.switch import FORMATS, REWARDS, SCORERS, RewardSpec, compute_score, reward, reward_spec
from codethinker.rewards.whitebox import WhiteboxConfig, whitebox_prompt, whitebox_questions
from tests.contra.helpers import example_flow, set_locals

FLOW = example_flow()  # f(2) == [0, 1, 2]; 4 blocks, weights 1, 1, 1, 2
TRACE = render_trace(FLOW)
WRONG_B3 = set_locals(TRACE, 2, "{'n': 2, 'a': 3, 'b': 6, 'c': 4}")  # the paper's example: R_proc = 2 * 2/5


def vanilla(answer: str = "assert f(2) == [0, 1, 2]") -> str:
    return f"[THOUGHT]\na = 3, b = 6, c = 3\n[/THOUGHT]\n[ANSWER]\n{answer}\n[/ANSWER]"


def whitebox(answers: list[str], answer: str = "assert f(2) == [0, 1, 2]") -> str:
    group = "".join(f"Q{i}: {a}\n" for i, a in enumerate(answers, start=1))
    return f"[THOUGHT]\nthinking\n[/THOUGHT]\n[WHITEBOX]\n{group}[/WHITEBOX]\n[ANSWER]\n{answer}\n[/ANSWER]"


ALL_RIGHT = ["2", "int", "3", "int", "6", "int"]  # the 6 questions of FLOW, answered right


class TestRouting:
    def test_crm_pays_the_consistency_reward(self):
        texts = [TRACE, WRONG_B3, vanilla(), "junk"]
        assert reward(texts, [FLOW] * 4, kind="crm") == pytest.approx([4.0, 0.8, 0.0, 0.0])
        assert reward([TRACE], [FLOW], kind="crm", crm={"gate": False}) == [4.0]
        assert reward([WRONG_B3], [FLOW], kind="crm", crm={"gate": False}) == pytest.approx([2.8])  # R_res ungated

    def test_orm_pays_2_for_a_valid_right_assertion_else_0(self):
        texts = [
            vanilla(),  # valid, right
            vanilla("assert f(2) == [0, 1]"),  # valid, wrong
            vanilla("assert f(2) == list(range(3))"),  # not a literal: format broken
            "[THOUGHT]\nx\n[/THOUGHT]\nassert f(2) == [0, 1, 2]",  # no [ANSWER] group
            "junk",
        ]
        assert reward(texts, [FLOW.to_json()] * len(texts), kind="orm") == [2.0, 0.0, 0.0, 0.0, 0.0]
        assert reward(texts[:2], [FLOW] * 2, kind="orm", crm={"gate": False}) == [2.0, 0.0]  # CRM switches: no effect

    def test_whitebox_pays_io_and_white_box_accuracy_only_with_a_right_assertion(self):
        texts = [
            whitebox(ALL_RIGHT),  # 2 * (0.5 * 1 + 0.5 * 1)
            whitebox(ALL_RIGHT[:3]),  # 2 * (0.5 + 0.5 * 0.5)
            whitebox([]),  # the assertion alone: 2 * 0.5
            whitebox(ALL_RIGHT, "assert f(2) == []"),  # wrong assertion: nothing
            "junk",
        ]
        assert reward(texts, [FLOW] * len(texts), kind="whitebox") == pytest.approx([2.0, 1.5, 1.0, 0.0, 0.0])
        assert reward(texts[1:2], [FLOW], kind="whitebox", whitebox={"a": 1.0}) == pytest.approx([1.0])

    def test_one_batch_three_kinds(self):
        texts = [TRACE, vanilla(), whitebox(ALL_RIGHT)]
        table = {kind: reward(texts, [FLOW] * 3, kind=kind) for kind in REWARDS}
        assert table == {"crm": [4.0, 0.0, 0.0], "orm": [2.0, 2.0, 0.0], "whitebox": [0.0, 1.0, 2.0]}
        # orm also reads a valid ConTra trace's RETURN (rewards/orm.py); a [WHITEBOX] group breaks its format

    def test_unknown_kind_or_setting_is_an_error(self):
        with pytest.raises(ValueError, match="reward must be one of crm, orm, whitebox"):
            reward([TRACE], [FLOW], kind="prm")
        with pytest.raises(ValueError, match=r"whitebox\.alpha: unknown key"):
            reward_spec("whitebox", whitebox={"alpha": 0.5})
        with pytest.raises(ValueError, match=r"crm\.gates: unknown key"):
            reward_spec("crm", crm={"gates": False})
        with pytest.raises(ValueError, match="whitebox a"):
            WhiteboxConfig(a=2.0)
        assert reward_spec(None) == RewardSpec()


class TestSchema:
    @pytest.mark.parametrize("kind", REWARDS)
    def test_same_parts_for_every_kind(self, kind):
        for text in (TRACE, vanilla(), "junk"):
            s = reward_spec(kind).score(text, FLOW)
            assert {"fmt", "r_proc", "r_res", "reward", "rcs", "answer_ok", "reason"} <= set(s)
            assert "deltas" not in s

    def test_rcs_is_the_contra_consistency_for_every_kind(self):
        for kind in REWARDS:
            spec = reward_spec(kind)
            assert spec.score(TRACE, FLOW)["rcs"] == 1.0
            assert spec.score(WRONG_B3, FLOW)["rcs"] == crm_score(WRONG_B3, FLOW)["rcs"] == 0.5
            assert spec.score(vanilla(), FLOW)["rcs"] == 0.0

    def test_formats_stops_and_blocks(self):
        assert FORMATS == {"crm": "contra", "orm": "vanilla", "whitebox": "whitebox"}
        assert reward_spec("crm").stop == ["[/TRACE]"] and reward_spec("crm").blocks
        for kind in ("orm", "whitebox"):
            assert reward_spec(kind).stop == ["[/ANSWER]"] and not reward_spec(kind).blocks


class TestPrompts:
    def test_crm_keeps_the_rows_contra_prompt(self):
        bare = render_prompt(FLOW, "bare")
        assert reward_spec("crm").prompt(FLOW, bare) == bare
        assert reward_spec("crm").prompt(FLOW) == render_prompt(FLOW)

    def test_orm_prompts_vanilla_tracing(self):
        msgs = reward_spec("orm").prompt(FLOW, render_prompt(FLOW))
        assert msgs == vanilla_prompt("\n".join(FLOW.lines), "f", "2")
        text = msgs[0]["content"]
        assert "[THOUGHT]" in text and "[ANSWER]" in text and "assert f(2) == ??" in text
        assert "[TRACE]" not in text and "[LINENO" not in text

    def test_whitebox_prompt_asks_the_questions_the_reward_scores(self):
        text = reward_spec("whitebox", whitebox={"k": 4}).prompt(FLOW)[0]["content"]
        assert "[LINENO 1]        a = n + 1" in text  # the questions name LINENOs: the code is numbered
        qs = whitebox_questions(FLOW, 4)
        assert [ln for ln in text.splitlines() if re.match(r"Q\d+: ", ln)] == [f"Q{q.qid}: {q.text}" for q in qs]
        assert "[WHITEBOX]" in text and "assert f(2) == ??" in text
        assert whitebox_prompt(FLOW, 6) == reward_spec("whitebox").prompt(FLOW)
        answered = whitebox([str(q.answer) for q in qs])
        assert reward_spec("whitebox", whitebox={"k": 4}).score(answered, FLOW)["wb_acc"] == 1.0


class TestVerlEntryPoint:
    def test_kind_and_settings_from_the_keywords(self):
        truth = FLOW.to_json()
        assert verl_reward.compute_score("d", vanilla(), truth, {}, reward="orm")["score"] == 2.0
        assert verl_reward.compute_score("d", vanilla(), truth, {})["score"] == 0.0  # no kind: CRM
        assert verl_reward.compute_score("d", TRACE, truth, None, reward="crm", crm={"orm": False})["score"] == 2.0
        wb = verl_reward.compute_score("d", whitebox(ALL_RIGHT[:3]), truth, None, reward="whitebox", whitebox={"a": 1})
        assert wb["score"] == pytest.approx(1.0) and wb["wb_acc"] == pytest.approx(0.5)

    def test_keywords_win_over_extra_info(self):
        truth = FLOW.to_json()
        info = {"reward": "orm", "crm": {"orm": False}}
        assert compute_score("d", vanilla(), truth, info)["score"] == 2.0  # per-sample kind
        assert compute_score("d", vanilla(), truth, info, reward="crm")["score"] == 0.0
        assert compute_score("d", TRACE, truth, info, reward="crm")["score"] == 2.0  # extra_info's switches
        assert compute_score("d", TRACE, truth, info, reward="crm", crm={})["score"] == 4.0

    def test_the_same_keys_for_every_kind(self):
        keys = {"score", "fmt", "r_proc", "r_res", "reward", "rcs", "answer_ok", "n_blocks"}
        for kind in ("crm", "orm"):
            out = compute_score("d", vanilla(), FLOW.to_json(), reward=kind)
            assert set(out) == keys
            assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in out.values())
        assert set(compute_score("d", vanilla(), FLOW.to_json(), reward="whitebox")) == keys | {"wb_acc"}


class TestDispatch:
    """One typed score per reward, one batched and one verl adapter: the kind picks the reward."""

    def test_each_kind_is_dispatched_to_its_reward(self):
        from codethinker.rewards.orm import orm_score
        from codethinker.rewards.whitebox import whitebox_score

        own = {"crm": crm_score, "orm": orm_score, "whitebox": whitebox_score}
        assert set(SCORERS) == set(REWARDS) == set(own)
        for kind, score in own.items():
            for text in (TRACE, WRONG_B3, vanilla(), whitebox(ALL_RIGHT[:3]), "junk"):
                expected = score(text, FLOW)
                assert isinstance(expected, Score)
                out = compute_score("leetcode_reasoning", text, FLOW.to_json(), {"reward": kind})
                assert out["score"] == expected.reward == out["reward"]
                assert (out["fmt"], out["r_res"], out["answer_ok"]) == (
                    expected.fmt,
                    expected.r_res,
                    expected.answer_ok,
                )
                assert reward([text], [FLOW], kind=kind) == [expected.reward]

    def test_the_data_source_does_not_pick_the_reward(self):
        # the GRPO data's data_source is the dataset's name (contra_sft.data_source), whatever the reward
        for source in ("leetcode_reasoning", "tiny", "orm", "whitebox"):
            assert compute_score(source, vanilla(), FLOW.to_json(), {})["score"] == 0.0  # CRM
            assert compute_score(source, vanilla(), FLOW.to_json(), {}, reward="orm")["score"] == 2.0

    def test_an_unknown_kind_is_refused_with_the_known_ones(self):
        with pytest.raises(ValueError, match=r"reward must be one of crm, orm, whitebox, got 'prm'"):
            compute_score("leetcode_reasoning", TRACE, FLOW.to_json(), {"reward": "prm"})
        with pytest.raises(ValueError, match=r"reward must be one of crm, orm, whitebox, got 'rm'"):
            verl_reward.compute_score("leetcode_reasoning", TRACE, FLOW.to_json(), None, reward="rm")

    def test_a_score_is_typed_and_reads_as_the_common_schema(self):
        s = reward_spec("whitebox").score(whitebox(ALL_RIGHT), FLOW)
        assert isinstance(s, Score) and s.reward == s["reward"] == 2.0 and s.wb_acc == 1.0
        assert list(s) == ["fmt", "r_proc", "r_res", "reward", "rcs", "reason", "answer_ok", "wb_acc"]
        with pytest.raises(dataclasses.FrozenInstanceError):
            s.reward = 0.0  # type: ignore[misc]
        assert list(crm_score(TRACE, FLOW)) == [
            "fmt",
            "deltas",
            "r_proc",
            "r_res",
            "reward",
            "rcs",
            "reason",
            "answer_ok",
        ]
