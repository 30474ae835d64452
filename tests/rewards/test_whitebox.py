"""ExecVerify's white-box reward (SPEC §8): 2 * ((1 - a) * io + a * wb_acc), paid only when io = 1."""

from __future__ import annotations

import pytest

from codethinker.config import from_mapping
from codethinker.rewards.switch import compute_score
from codethinker.rewards.whitebox import (
    Question,
    WhiteboxConfig,
    whitebox_questions,
    whitebox_reward,
    whitebox_score,
)
from tests.contra.helpers import example_flow, make_flow

FLOW = example_flow()  # locals: {n: 2, a: 3} | +b: 6 | +c: 3 | same; output [0, 1, 2]
ALL_RIGHT = ["2", "int", "3", "int", "6", "int"]


def rollout(answers: list[str] | dict[int, str], final: str = "assert f(2) == [0, 1, 2]") -> str:
    items = answers.items() if isinstance(answers, dict) else enumerate(answers, start=1)
    group = "".join(f"Q{q}: {a}\n" for q, a in items)
    return f"[THOUGHT]\nthinking\n[/THOUGHT]\n[WHITEBOX]\n{group}[/WHITEBOX]\n[ANSWER]\n{final}\n[/ANSWER]"


class TestWhitebox:
    def test_questions(self):
        qs = whitebox_questions(FLOW)
        assert [(q.qid, q.kind, q.answer) for q in qs] == [
            (1, "value", 2),
            (2, "type", "int"),
            (3, "value", 3),
            (4, "type", "int"),
            (5, "value", 6),
            (6, "type", "int"),
        ]
        assert qs[0].text == "What is the value of `n` after LINENO 1?"
        assert qs[5].text == "What is the type of `b` after LINENO 2?"
        assert all(isinstance(q, Question) for q in qs)

    def test_question_limit_and_unchanged_variables(self):
        assert len(whitebox_questions(FLOW, k=2)) == 2
        qs = whitebox_questions(FLOW, k=100)
        assert [q.text.split("`")[1] for q in qs if q.kind == "value"] == ["n", "a", "b", "c"]  # B4 changes nothing
        assert whitebox_questions(FLOW, k=0) == []

    @pytest.mark.parametrize(
        ("answers", "wb_acc", "expected"),
        [
            (ALL_RIGHT, 1.0, 2.0),
            ([], 0.0, 1.0),
            (["2", "int", "3", "str", "6.0", "list"], 0.5, 1.5),  # 3 of 6: 2 * (0.5 + 0.5 * 0.5)
            ({1: "2"}, 1 / 6, 2 * (0.5 + 0.5 / 6)),
            ({6: "int", 5: "6", 1: "2"}, 0.5, 1.5),  # order does not matter
            ({1: "True"}, 0.0, 1.0),  # type-strict values
            ({1: "2", 7: "x"}, 1 / 6, 2 * (0.5 + 0.5 / 6)),  # unknown question ignored
            ({1: "f(2)"}, 0.0, 1.0),  # a non-literal value answer is just wrong
        ],
    )
    def test_right_final_answer(self, answers, wb_acc, expected):
        s = whitebox_score(rollout(answers), FLOW)
        assert s["fmt"] == 1 and s["answer_ok"] == 1 and s["r_res"] == 2.0
        assert s["wb_acc"] == pytest.approx(wb_acc)
        assert s["r_proc"] == pytest.approx(2 * wb_acc)
        assert s["reward"] == pytest.approx(expected)

    def test_paid_only_when_the_final_assertion_passes(self):
        s = whitebox_score(rollout(ALL_RIGHT, "assert f(2) == [0, 1]"), FLOW)
        assert (s["fmt"], s["answer_ok"], s["wb_acc"], s["reward"]) == (1, 0, 1.0, 0.0)

    def test_first_answer_to_a_question_counts(self):
        text = rollout(ALL_RIGHT).replace("Q1: 2\n", "Q1: 5\nQ1: 2\n")
        assert whitebox_score(text, FLOW)["wb_acc"] == pytest.approx(5 / 6)

    def test_answers_are_stripped(self):
        text = rollout(["  2 ", " int\t", "3", "int", "6", "int"]).replace("Q1:", "  Q1:")
        assert whitebox_score(text, FLOW)["wb_acc"] == 1.0

    @pytest.mark.parametrize("a", [0.0, 0.25, 1.0])
    def test_mixing_weight(self, a):
        s = whitebox_score(rollout(["2", "int", "3"]), FLOW, a=a)
        assert s["reward"] == pytest.approx(2 * ((1 - a) * 1 + a * 0.5))

    @pytest.mark.parametrize(
        "text",
        [
            "junk",
            rollout(ALL_RIGHT).replace("[THOUGHT]", "[THOUGHT] "),
            rollout(ALL_RIGHT).replace("[ANSWER]\n", ""),
            rollout(ALL_RIGHT, "assert f(2) == list(range(3))"),
            rollout(ALL_RIGHT) + "\nafter",
        ],
    )
    def test_invalid(self, text):
        s = whitebox_score(text, FLOW)
        assert (s["fmt"], s["reward"], s["answer_ok"]) == (0, 0.0, 0)
        assert s["reason"]

    def test_without_whitebox_group_is_plain_vanilla(self):
        text = "[THOUGHT]\nx\n[/THOUGHT]\n[ANSWER]\nassert f(2) == [0, 1, 2]\n[/ANSWER]"
        s = whitebox_score(text, FLOW)
        assert (s["fmt"], s["wb_acc"], s["reward"]) == (1, 0.0, 1.0)

    def test_independent_questions_no_prefix_consistency(self):
        # a wrong early answer does not void later right ones (the contrast with CRM)
        text = rollout(["9", "int", "3", "int", "6", "int"])
        assert whitebox_score(text, FLOW)["wb_acc"] == pytest.approx(5 / 6)

    def test_value_questions_on_containers_and_floats(self):
        flow = make_flow(
            "def f(x):\n    y = [x / 3, {'k': (1,)}]\n    return y\n",
            "1",
            [{"x": 1, "y": [1 / 3, {"k": (1,)}]}] * 2,
            [1 / 3, {"k": (1,)}],
        )
        qs = whitebox_questions(flow)
        assert [q.answer for q in qs] == [1, "int", [1 / 3, {"k": (1,)}], "list"]
        text = rollout(["1", "int", "[0.3333333, {'k': (1,)}]", "list"], "assert f(1) == [0.333333333, {'k': (1,)}]")
        s = whitebox_score(text, flow)
        assert (s["wb_acc"], s["reward"]) == (1.0, 2.0)

    def test_batch_mixed(self):
        texts = [rollout(ALL_RIGHT), rollout([]), "junk", rollout(ALL_RIGHT, "assert f(2) == 0")]
        assert whitebox_reward(texts, [FLOW, FLOW.to_json(), FLOW, FLOW], prompts=None) == pytest.approx(
            [2.0, 1.0, 0.0, 0.0]
        )
        assert whitebox_reward([], []) == []

    def test_compute_score(self):
        out = compute_score("d", rollout(["2", "int", "3"]), FLOW.to_json(), {"reward": "whitebox"})
        parts = {k: out[k] for k in ("score", "fmt", "answer_ok", "wb_acc")}
        assert parts == pytest.approx({"score": 1.5, "fmt": 1, "answer_ok": 1, "wb_acc": 0.5})
        assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in out.values())


@pytest.mark.parametrize(
    ("a", "k"),
    [
        (float("nan"), 6),
        (float("inf"), 6),
        (-0.5, 6),
        (1.5, 6),
        ("0.5", 6),
        (True, 6),
        (0.5, 0),
        (0.5, 1000),
        (0.5, 2.0),
    ],
)
def test_parameters_are_checked(a, k):
    with pytest.raises(ValueError, match="whitebox"):
        whitebox_score(rollout(ALL_RIGHT), FLOW, a=a, k=k)


def test_config_settings_reach_the_score():
    assert WhiteboxConfig() == from_mapping(WhiteboxConfig, None) == WhiteboxConfig(a=0.5, k=6)
    with pytest.raises(ValueError, match="whitebox k"):
        from_mapping(WhiteboxConfig, {"k": 0}, "whitebox")
    with pytest.raises(ValueError, match=r"whitebox\.questions: unknown key"):
        from_mapping(WhiteboxConfig, {"questions": 3}, "whitebox")
    text = rollout(["2", "int", "3"])  # 3 of 6 right; the first 2 both right
    info = {"reward": "whitebox", "whitebox": {"a": 1.0, "k": 2}}
    assert compute_score("d", text, FLOW.to_json(), info)["score"] == 2.0
    assert whitebox_reward([text], [FLOW], a=1.0) == pytest.approx([1.0])
    assert whitebox_reward([text], [FLOW], a=1.0, k=2) == [2.0]
