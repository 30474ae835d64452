"""CodeReasoner's outcome reward (SPEC §8): 2 when the format holds and the assertion is right."""

from __future__ import annotations

import pytest

from codethinker.contra.render import render_trace
from codethinker.rewards.orm import orm_reward, orm_score, parse_vanilla
from codethinker.rewards.switch import compute_score
from tests.contra.helpers import example_flow, make_flow, set_answer, set_locals

FLOW = example_flow()  # f(2) == [0, 1, 2]


def vanilla(answer: str = "assert f(2) == [0, 1, 2]", thought: str = "a = 3, b = 6, c = 3") -> str:
    return f"[THOUGHT]\n{thought}\n[/THOUGHT]\n[ANSWER]\n{answer}\n[/ANSWER]"


class TestORM:
    def test_valid_right(self):
        s = orm_score(vanilla(), FLOW)
        assert s == {
            "fmt": 1,
            "deltas": [0, 0, 0, 0],
            "r_proc": 0.0,
            "r_res": 2.0,
            "reward": 2.0,
            "rcs": 0.0,
            "reason": None,
            "answer_ok": 1,
        }

    def test_valid_wrong(self):
        s = orm_score(vanilla("assert f(2) == [0, 1]"), FLOW)
        assert (s["fmt"], s["reward"], s["answer_ok"], s["reason"]) == (1, 0.0, 0, None)

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("assert f(2) == [0, 1, 2]", "structure"),
            ("", "structure"),
            (vanilla().replace("[THOUGHT]", " [THOUGHT]"), "structure"),
            (vanilla().replace("[/ANSWER]", "[/ANSWER] "), "structure"),
            (vanilla().replace("[ANSWER]\n", "x\n[ANSWER]\n"), "structure"),
            (vanilla().replace("[/THOUGHT]", "[ANSWER]\n[/THOUGHT]"), "structure"),
            (vanilla() + "\ntrailing", "structure"),
            (vanilla(thought="[/ANSWER]"), "structure"),
            (vanilla("assert f(2) == [0, 1, 2]\nassert f(2) == [0, 1, 2]"), "return"),
            (vanilla(""), "return"),
            (vanilla("assert g(2) == [0, 1, 2]"), "return"),
            (vanilla("assert f(2) == list(range(3))"), "return"),
            (vanilla("assert f(2) == __import__('os').getcwd()"), "return"),
            ("x" * 2_000_001, "too_long"),
        ],
    )
    def test_invalid(self, text, reason):
        s = orm_score(text, FLOW)
        assert (s["fmt"], s["reward"], s["answer_ok"]) == (0, 0.0, 0)
        assert s["reason"] == reason
        assert parse_vanilla(text, "f") == (False, None, reason)

    def test_parse_vanilla(self):
        assert parse_vanilla(vanilla(), "f") == (True, [0, 1, 2], None)
        assert parse_vanilla("\n" + vanilla() + "\n\n", "f")[0]  # outer newlines tolerated
        assert parse_vanilla(vanilla(thought="multi\nline\n\n[LINENO 0]"), "f")[0]
        assert parse_vanilla(vanilla("\n  assert f(2) == [0, 1, 2]  \n"), "f")[0]

    def test_type_strict_and_float_tolerance(self):
        flow = make_flow("def f(x):\n    return x / 3\n", "1", [{"x": 1}], 1 / 3)
        assert orm_score(vanilla("assert f(1) == 0.333333333"), flow)["reward"] == 2.0
        assert orm_score(vanilla("assert f(1) == 0.33"), flow)["reward"] == 0.0
        flow = make_flow("def f(x):\n    return x > 0\n", "1", [{"x": 1}], True)
        assert orm_score(vanilla("assert f(1) == True"), flow)["reward"] == 2.0
        assert orm_score(vanilla("assert f(1) == 1"), flow)["reward"] == 0.0

    def test_contra_traces_are_scored_on_their_answer_only(self):
        good = render_trace(FLOW)
        assert orm_score(good, FLOW)["reward"] == 2.0
        wrong_locals = set_locals(good, 1, "{}")
        assert orm_score(wrong_locals, FLOW)["reward"] == 2.0  # no process signal
        assert orm_score(set_answer(good, "[0]"), FLOW)["reward"] == 0.0
        broken = good.replace("[LINENO 2]", "[LINENO 7]")
        s = orm_score(broken, FLOW)
        assert (s["fmt"], s["reward"], s["reason"]) == (0, 0.0, "lineno_order")

    def test_batch_mixed(self):
        texts = [vanilla(), vanilla("assert f(2) == 0"), "junk", render_trace(FLOW), vanilla()]
        truths = [FLOW, FLOW, FLOW, FLOW.to_json(), make_flow("def f(x):\n    return x\n", "1", [{"x": 1}], 1)]
        assert orm_reward(texts, truths, prompts=None) == [2.0, 0.0, 0.0, 2.0, 0.0]
        assert orm_reward([], []) == []
        with pytest.raises(ValueError):
            orm_reward(["a"], [])

    def test_compute_score(self):
        parts = ("score", "fmt", "r_res", "answer_ok")
        out = compute_score("cruxeval", vanilla(), FLOW.to_json(), {"reward": "orm"})
        assert {k: out[k] for k in parts} == {"score": 2.0, "fmt": 1, "r_res": 2.0, "answer_ok": 1}
        out = compute_score("cruxeval", "junk", FLOW.to_json(), {"reward": "orm", "crm": {"gate": False}})
        assert {k: out[k] for k in parts} == {"score": 0.0, "fmt": 0, "r_res": 0.0, "answer_ok": 0}
        assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in out.values())
