"""CRM (SPEC §4): the paper's worked example, every ablation switch, RCS, TRL and verl entry points."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from codethinker.config import from_mapping
from codethinker.contra.render import render_trace
from codethinker.rewards.crm import CRMConfig, crm_reward, crm_score, rcs
from codethinker.rewards.switch import compute_score
from tests.contra.helpers import EXAMPLE_LOCALS, example_flow, make_flow, set_answer, set_locals

FLOW = example_flow()  # 4 blocks, CCW weights 1, 1, 1, 2; output [0, 1, 2]
GOOD = render_trace(FLOW, ["n is 2, a = 3.", "b = 6.", "c = 3.", "range(3)."])
WRONG_B3 = set_locals(GOOD, 2, "{'n': 2, 'a': 3, 'b': 6, 'c': 4}")  # B4 still right
WRONG_B3_B4 = set_locals(WRONG_B3, 3, "{'n': 2, 'a': 3, 'b': 6, 'c': 4}")
WRONG_ANSWER = set_answer(GOOD, "[0, 1]")
WRONG_B3_AND_ANSWER = set_answer(WRONG_B3, "[0, 1]")
JUNK = "I think the answer is [0, 1, 2]."
KEYS = {"fmt", "deltas", "r_proc", "r_res", "reward", "rcs", "reason", "answer_ok"}


def reward(text: str, **switches) -> float:
    return crm_score(text, FLOW, CRMConfig(**switches))["reward"]


class TestCRM:
    def test_example_weights(self):
        assert FLOW.weights == [1, 1, 1, 2]

    def test_valid_consistent_trace_scores_4(self):
        s = crm_score(GOOD, FLOW)
        assert set(s) == KEYS
        assert s == {
            "fmt": 1,
            "deltas": [1, 1, 1, 1],
            "r_proc": 2.0,
            "r_res": 2.0,
            "reward": 4.0,
            "rcs": 1.0,
            "reason": None,
            "answer_ok": 1,
        }

    def test_paper_example_wrong_b3_closes_the_gate(self):
        s = crm_score(WRONG_B3, FLOW)
        assert s["fmt"] == 1 and s["deltas"] == [1, 1, 0, 1]
        assert s["r_proc"] == pytest.approx(2 * 2 / 5) == pytest.approx(0.8)
        assert s["r_res"] == 2.0 and s["answer_ok"] == 1  # the answer is right ...
        assert s["reward"] == pytest.approx(0.8)  # ... but the gate is closed
        assert s["rcs"] == 0.5
        assert crm_score(WRONG_B3_B4, FLOW)["reward"] == pytest.approx(0.8)

    def test_wrong_first_block_scores_0(self):
        s = crm_score(set_locals(GOOD, 0, "{'n': 2}"), FLOW)
        assert (s["fmt"], s["r_proc"], s["reward"], s["rcs"]) == (1, 0.0, 0.0, 0.0)

    def test_wrong_answer_after_consistent_blocks(self):
        s = crm_score(WRONG_ANSWER, FLOW)
        assert (s["r_proc"], s["r_res"], s["reward"], s["answer_ok"]) == (2.0, 0.0, 2.0, 0)

    @pytest.mark.parametrize(
        "text",
        [
            JUNK,
            "",
            GOOD.replace("[TRACE]", " [TRACE]"),
            GOOD.replace("[LINENO 2]", "[LINENO 9]"),
            set_locals(GOOD, 1, "[1]"),
            set_answer(GOOD, "list(range(3))"),
            GOOD + "\nmore",
        ],
    )
    def test_invalid_trace_scores_0(self, text):
        s = crm_score(text, FLOW)
        assert set(s) == KEYS
        assert (s["fmt"], s["r_proc"], s["r_res"], s["reward"], s["rcs"], s["answer_ok"]) == (0, 0.0, 0.0, 0.0, 0.0, 0)
        assert s["deltas"] == [0, 0, 0, 0]
        assert isinstance(s["reason"], str)
        for switches in ({"gate": False}, {"prm": False}, {"prefix": False}, {"ccw": False}, {"alpha": 3.0}):
            assert reward(text, **switches) == 0.0

    def test_type_strict_locals_and_answer(self):
        flow = make_flow("def f(x):\n    y = x > 0\n    return y\n", "1", [{"x": 1, "y": True}] * 2, True)
        good = render_trace(flow)
        assert crm_score(good, flow)["reward"] == 4.0
        assert crm_score(set_answer(good, "1"), flow)["reward"] == 2.0
        assert crm_score(set_locals(good, 0, "{'x': 1, 'y': 1}"), flow)["reward"] == 0.0
        assert crm_score(set_locals(good, 1, "{'x': True, 'y': True}"), flow)["reward"] == 1.0

    def test_float_tolerance(self):
        flow = make_flow(
            "def f(x):\n    y = x + 0.2\n    return y\n",
            "0.1",
            [{"x": 0.1, "y": 0.30000000000000004}] * 2,
            0.30000000000000004,
        )
        text = set_answer(
            set_locals(set_locals(render_trace(flow), 0, "{'x': 0.1, 'y': 0.3}"), 1, "{'y': 0.3, 'x': 0.1}"), "0.3"
        )
        assert crm_score(text, flow)["reward"] == 4.0
        assert crm_score(set_answer(text, "0.31"), flow)["reward"] == 2.0

    # -------------------------------------------------------------------- ablations (paper Table 2)
    @pytest.mark.parametrize(
        ("switches", "good", "wrong_b3", "wrong_answer", "wrong_b3_and_answer"),
        [
            ({}, 4.0, 0.8, 2.0, 0.8),
            # w/o PRM: R = R_res
            ({"prm": False}, 2.0, 2.0, 0.0, 0.0),
            # w/o prefix consistency: d_t instead of prod; B4 counts again: 2*(1+1+2)/5
            ({"prefix": False}, 4.0, 1.6, 2.0, 1.6),
            # w/o gate: R = R_proc + R_res
            ({"gate": False}, 4.0, 2.8, 2.0, 0.8),
            # w/o ORM: R = R_proc
            ({"orm": False}, 2.0, 0.8, 2.0, 0.8),
            # w/o CCW: w_t = 1: 2*2/4
            ({"ccw": False}, 4.0, 1.0, 2.0, 1.0),
            ({"ccw": False, "prefix": False}, 4.0, 1.5, 2.0, 1.5),
            ({"gate": False, "prefix": False}, 4.0, 3.6, 2.0, 1.6),
            ({"prm": False, "orm": False}, 0.0, 0.0, 0.0, 0.0),
            ({"alpha": 0.5}, 3.0, 0.4, 1.0, 0.4),
            ({"alpha": 2.0}, 6.0, 1.6, 4.0, 1.6),
            ({"alpha": 0.0}, 2.0, 0.0, 0.0, 0.0),
            ({"alpha": 0.5, "gate": False}, 3.0, 2.4, 1.0, 0.4),
        ],
    )
    def test_ablation_switches(self, switches, good, wrong_b3, wrong_answer, wrong_b3_and_answer):
        assert reward(GOOD, **switches) == pytest.approx(good)
        assert reward(WRONG_B3, **switches) == pytest.approx(wrong_b3)
        assert reward(WRONG_ANSWER, **switches) == pytest.approx(wrong_answer)
        assert reward(WRONG_B3_AND_ANSWER, **switches) == pytest.approx(wrong_b3_and_answer)

    def test_r_proc_and_r_res_parts_under_switches(self):
        s = crm_score(WRONG_B3, FLOW, CRMConfig(prefix=False, ccw=False))
        assert s["r_proc"] == pytest.approx(2 * 3 / 4) and s["r_res"] == 2.0
        s = crm_score(WRONG_B3, FLOW, CRMConfig(prm=False))
        assert s["r_proc"] == pytest.approx(0.8) and s["reward"] == 2.0  # parts are still reported

    def test_weights_come_from_the_truth(self):
        # a wrong heavy block costs more than a wrong light one
        light = set_locals(GOOD, 3, "{}")  # B4 (weight 2) wrong: 2*(1+1+1)/5
        assert reward(light) == pytest.approx(1.2)
        assert reward(light, ccw=False) == pytest.approx(1.5)

    def test_config(self):
        assert CRMConfig() == CRMConfig(prm=True, prefix=True, gate=True, orm=True, ccw=True, alpha=1.0)
        assert from_mapping(CRMConfig, None) == CRMConfig() == from_mapping(CRMConfig, {})
        assert from_mapping(CRMConfig, {"gate": False, "alpha": 0.5}) == CRMConfig(gate=False, alpha=0.5)
        with pytest.raises(ValueError, match=r"crm\.rcc: unknown key"):
            from_mapping(CRMConfig, {"rcc": False}, "crm")
        assert asdict(CRMConfig(ccw=False)) == {
            "prm": True,
            "prefix": True,
            "gate": True,
            "orm": True,
            "ccw": False,
            "alpha": 1.0,
        }
        for f in CRMConfig.__dataclass_fields__.values():
            assert f.metadata.get("help")

    # -------------------------------------------------------------------- batches (TRL style)
    def test_batch_mixed(self):
        texts = [GOOD, JUNK, WRONG_B3, WRONG_ANSWER, WRONG_B3_AND_ANSWER, GOOD + "\n"]
        out = crm_reward(texts, [FLOW] * len(texts))
        assert out == pytest.approx([4.0, 0.0, 0.8, 2.0, 0.8, 4.0])
        assert all(type(x) is float for x in out)

    def test_batch_valid_and_invalid_only(self):
        assert crm_reward([GOOD, GOOD], [FLOW, FLOW]) == [4.0, 4.0]
        assert crm_reward([JUNK, ""], [FLOW, FLOW]) == [0.0, 0.0]
        assert crm_reward([], []) == []

    def test_batch_truths_as_json_and_extra_kwargs(self):
        truth = FLOW.to_json()
        other = make_flow("def f(x):\n    return x\n", "1", [{"x": 1}], 1)
        out = crm_reward(
            [GOOD, render_trace(other), GOOD],
            [truth, other.to_json(), other],
            CRMConfig(gate=False),
            prompts=["p"] * 3,
            completion_ids=None,
        )
        assert out == [4.0, 4.0, 0.0]

    def test_batch_length_mismatch(self):
        with pytest.raises(ValueError):
            crm_reward([GOOD, GOOD], [FLOW])


class TestRCS:
    @pytest.mark.parametrize(
        ("deltas", "expected"),
        [
            ([1, 1, 0, 1], 0.5),
            ([1, 1, 1, 1], 1.0),
            ([0, 1, 1, 1], 0.0),
            ([1, 1, 1, 0], 0.75),
            ([1], 1.0),
            ([0], 0.0),
            ([], 0.0),
            ([True, False], 0.5),
        ],
    )
    def test_rcs(self, deltas, expected):
        assert rcs(deltas) == expected

    def test_rcs_of_scored_traces(self):
        assert crm_score(GOOD, FLOW)["rcs"] == 1.0
        assert crm_score(WRONG_B3, FLOW)["rcs"] == 0.5  # 4 blocks, first error in block 3
        assert crm_score(set_locals(GOOD, 3, "{}"), FLOW)["rcs"] == 0.75
        assert crm_score(WRONG_ANSWER, FLOW)["rcs"] == 1.0  # RCS measures the blocks only
        assert crm_score(JUNK, FLOW)["rcs"] == 0.0

    def test_rcs_mixed_batch(self):
        texts = [
            GOOD,
            JUNK,
            WRONG_B3,
            WRONG_ANSWER,
            set_locals(GOOD, 0, "{}"),
            GOOD.replace("[LINENO 2]", "[LINENO 3]"),
        ]
        assert [crm_score(t, FLOW)["rcs"] for t in texts] == [1.0, 0.0, 0.5, 1.0, 0.0, 0.0]

    def test_rcs_ignores_switches(self):
        for cfg in (CRMConfig(prefix=False), CRMConfig(ccw=False), CRMConfig(prm=False)):
            assert crm_score(WRONG_B3, FLOW, cfg)["rcs"] == 0.5


class TestComputeScore:
    """verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)`` (CRM: the default kind)."""

    def check(self, out: dict) -> None:
        assert "score" in out
        assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in out.values()), out
        assert all(math.isfinite(v) for v in out.values())
        json.dumps(out)

    def test_signature_and_parts(self):
        out = compute_score("cruxeval", GOOD, FLOW.to_json(), {"index": 3})
        self.check(out)
        assert out["score"] == 4.0 == out["reward"]
        assert out["fmt"] == 1 and out["r_proc"] == 2.0 and out["r_res"] == 2.0 and out["rcs"] == 1.0
        assert out["n_blocks"] == 4
        out = compute_score("cruxeval", WRONG_B3, FLOW.to_json())
        self.check(out)
        assert out["score"] == pytest.approx(0.8)

    def test_invalid(self):
        out = compute_score("x", JUNK, FLOW.to_json(), None)
        self.check(out)
        assert out["score"] == 0.0 and out["fmt"] == 0

    def test_switches_from_extra_info(self):
        out = compute_score("x", WRONG_B3, FLOW.to_json(), {"crm": {"gate": False}})
        assert out["score"] == pytest.approx(2.8)
        out = compute_score("x", WRONG_B3, FLOW.to_json(), {"crm": {"prefix": False, "ccw": False}})
        assert out["score"] == pytest.approx(1.5)
        with pytest.raises(ValueError):
            compute_score("x", GOOD, FLOW.to_json(), {"crm": {"nope": 1}})

    def test_keyword_call(self):
        out = compute_score(data_source="d", solution_str=GOOD, ground_truth=FLOW.to_json(), extra_info={})
        assert out["score"] == 4.0


def test_example_locals_constant_is_consistent():
    assert [b.locals for b in FLOW.blocks] == EXAMPLE_LOCALS


# --------------------------------------------------------------------------- config checks, exact weights
@pytest.mark.parametrize(
    "switches",
    [
        {"alpha": float("nan")},
        {"alpha": float("inf")},
        {"alpha": -float("inf")},
        {"alpha": -5},
        {"alpha": -1e-9},
        {"alpha": 100.5},
        {"alpha": "1"},
        {"alpha": True},
        {"alpha": None},
        {"gate": "no"},
        {"prm": 0},
        {"ccw": None},
    ],
)
def test_config_rejects_non_finite_and_out_of_range_values(switches):
    with pytest.raises(ValueError, match=next(iter(switches))):
        CRMConfig(**switches)
    with pytest.raises(ValueError):
        from_mapping(CRMConfig, switches, "crm")
    with pytest.raises(ValueError):
        compute_score("d", GOOD, FLOW.to_json(), {"crm": switches})


@pytest.mark.parametrize("alpha", [0, 0.0, 1, 0.5, 100.0])
def test_config_accepts_finite_alpha_in_range(alpha):
    assert CRMConfig(alpha=alpha).alpha == alpha
    assert math.isfinite(crm_score(GOOD, FLOW, CRMConfig(alpha=alpha))["reward"])


def huge_weight_flow(weights: list[int]):
    d = json.loads(FLOW.to_json())
    for b, w in zip(d["blocks"], weights, strict=True):
        b["weight"] = w
    return d


def test_huge_truth_weights_score_exactly():
    """Weights are ints of any size: no OverflowError, and the gate is exact."""
    from codethinker.contra.tracer import Flow

    flow = Flow.from_dict(huge_weight_flow([10**400, 10**400, 10**400, 10**400]))
    out = crm_score(GOOD, flow)
    assert (out["r_proc"], out["reward"]) == (2.0, 4.0)
    out = crm_score(WRONG_B3_B4, flow)
    assert out["r_proc"] == pytest.approx(1.0) and out["reward"] == pytest.approx(1.0)
    # one light block wrong: R_proc rounds to 2.0 in floating point, yet the gate stays closed
    flow = Flow.from_dict(huge_weight_flow([10**400, 10**400, 10**400, 1]))
    out = crm_score(set_locals(GOOD, 3, "{}"), flow)
    assert out["deltas"] == [1, 1, 1, 0] and out["r_proc"] == 2.0
    assert out["reward"] == 2.0  # alpha * R_proc only: R_res is gated
