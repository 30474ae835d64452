"""contra_sft: template thoughts, rejection sampling, the split by function, verl records."""

from __future__ import annotations

import json

import pytest

from codethinker.contra.render import render_trace, skeleton
from codethinker.contra.tracer import Block, Flow
from codethinker.contra.values import literal_repr
from codethinker.data.sft import (
    check_trace,
    extract_trace,
    extract_traces,
    grpo_record,
    sft_record,
    split_by_function,
    teacher_prompt,
    template_thoughts,
    template_trace,
)

SRC = (
    "def f(nums, k):\n"
    "    total = 0\n"
    "    for x in nums:\n"
    "        total += x\n"
    "    if total > k:\n"
    "        total = k\n"
    "    return total\n"
)


def make_flow(source: str, args: str, exits: list[dict], spans: list[tuple[int, int, int]], output) -> Flow:
    """A Flow built by hand (what the tracer would give), so these tests need no sandbox."""
    blocks = tuple(Block(s, e, w, loc, literal_repr(loc)) for (s, e, w), loc in zip(spans, exits, strict=True))
    lines = tuple(source.rstrip("\n").split("\n"))
    return Flow("f", args, lines, blocks, output, literal_repr(output))


FLOW = make_flow(
    SRC,
    "[1, 2, 3], 4",
    [
        {"nums": [1, 2, 3], "k": 4, "total": 0},
        {"nums": [1, 2, 3], "k": 4, "total": 6, "x": 3},
        {"nums": [1, 2, 3], "k": 4, "total": 4, "x": 3},
        {"nums": [1, 2, 3], "k": 4, "total": 4, "x": 3},
    ],
    [(0, 1, 1), (2, 3, 2), (4, 5, 2), (6, 6, 1)],
    4,
)


def test_template_thoughts_read_the_trace():
    th = template_thoughts(FLOW)
    assert len(th) == 4
    assert th[0].startswith("`f` is called with nums = [1, 2, 3], k = 4.") and "`total` becomes 0" in th[0]
    assert "runs 3 times" in th[1] and "`total` changes from 0 to 6" in th[1] and "`x` becomes 3" in th[1]
    assert "`total > k` is True, so the `if` branch runs." in th[2]
    assert "returns 4" in th[3] and "No local variable changes" in th[3]
    assert check_trace(template_trace(FLOW), FLOW) is None


def test_template_false_branch_and_unknown_loops():
    src = (
        "def f(s):\n    n = len(s)\n    while n > 3:\n        n -= 1\n    if n > 10:\n        n = 0\n"
        "    for c in s[1:]:\n        n += 1\n    return n\n"
    )
    exits = [
        {"s": "ab", "n": 2},
        {"s": "ab", "n": 2},
        {"s": "ab", "n": 2},
        {"s": "ab", "n": 3, "c": "b"},
        {"s": "ab", "n": 3, "c": "b"},
    ]
    flow = make_flow(src, "'ab'", exits, [(0, 1, 1), (2, 3, 2), (4, 5, 2), (6, 7, 2), (8, 8, 1)], 3)
    th = template_thoughts(flow)
    assert "repeats while its condition holds" in th[1]
    assert "`n > 10` is False, so its body is skipped." in th[2]
    assert "runs over its iterable" in th[3]  # s[1:] is not evaluated: slices are outside the template's reach
    assert check_trace(render_trace(flow, th), flow) is None


def test_check_trace_rejections():
    good = template_trace(FLOW)
    assert (
        check_trace(
            good.replace(
                "{'nums': [1, 2, 3], 'k': 4, 'total': 6, 'x': 3}", "{'nums': [1, 2, 3], 'k': 4, 'total': 7, 'x': 3}"
            ),
            FLOW,
        )
        == "locals_wrong"
    )
    assert (
        check_trace(
            good.replace("{'nums': [1, 2, 3], 'k': 4, 'total': 0}", "{'nums': [1, 2, 3], 'k': 4, 'total': 0.0}"), FLOW
        )
        == "locals_wrong"
    )
    assert check_trace(good.replace("== 4", "== 5"), FLOW) == "return_wrong"
    assert check_trace(good.replace("== 4", "== True"), FLOW) == "return_wrong"  # type-strict
    assert check_trace(good.replace("[TRACE]", "[TRACE] "), FLOW).startswith("invalid_")
    assert check_trace(good.replace("[LINENO 1]", "[LINENO 2]"), FLOW) == "invalid_lineno_order"
    assert check_trace(skeleton(FLOW), FLOW) == "placeholder_left"
    assert check_trace(render_trace(FLOW), FLOW) == "empty_thought"
    assert check_trace("junk", FLOW).startswith("invalid_")


def test_extract_trace_from_answers():
    t = template_trace(FLOW)
    assert extract_trace(f"<think>[TRACE] maybe</think>Sure!\n```\n{t}\n```\nDone.") == t
    assert extract_trace("no trace here") is None
    assert extract_trace("[/TRACE]\n[TRACE]") is None


class ScriptedClient:
    def __init__(self, answers):
        self.answers = answers
        self.calls = 0

    def complete_many(self, batch):
        self.calls += 1
        return [self.answers.pop(0) for _ in batch]


def test_llm_rejection_sampling_rounds():
    good = template_trace(FLOW)
    first = ScriptedClient([None, "blah", good.replace("== 4", "== 3")])
    second = ScriptedClient([good, good, good])
    traces, rejected = extract_traces([FLOW, FLOW, FLOW], teacher="llm", clients=[first, second])
    assert traces == [good] * 3
    assert rejected == {"request_failed": 1, "no_trace": 1, "return_wrong": 1}
    traces, rejected = extract_traces([FLOW], teacher="template")
    assert traces[0] == good and not rejected
    with pytest.raises(ValueError):
        extract_traces([FLOW], teacher="nope")
    msgs = teacher_prompt(FLOW)
    assert "[THOUGHT]\n<fill in" in msgs[0]["content"] and "Input: f([1, 2, 3], 4)" in msgs[0]["content"]


def test_split_by_function_even_and_disjoint():
    samples = [{"task_id": f"t{i}", "id": f"t{i}/{j}"} for i in range(40) for j in range(1 + i % 15)]
    a, b = split_by_function(samples, seed=0)
    fa, fb = {s["task_id"] for s in a}, {s["task_id"] for s in b}
    assert not fa & fb and len(a) + len(b) == len(samples)
    assert abs(len(a) - len(b)) <= 15
    assert split_by_function(samples, seed=0) == (a, b)
    assert split_by_function(samples, seed=1) != (a, b)


def test_records():
    truth = FLOW.to_json()
    s = {"id": "t/3", "task_id": "t", "truth": truth}
    g = grpo_record(s, "leetcode_reasoning", "train", 7)
    assert g["reward_model"] == {"style": "rule", "ground_truth": truth}
    info = {"id": "t/3", "task_id": "t", "source": "leetcode", "split": "train", "index": 7, "heldout": ""}
    assert g["extra_info"] == info
    assert grpo_record(s, "x", "eval", 0, heldout="shape_disjoint")["extra_info"]["heldout"] == "shape_disjoint"
    assert g["prompt"][0]["role"] == "user" and "[LINENO 0]    def f(nums, k):" in g["prompt"][0]["content"]
    assert g["ability"] == "code_reasoning" and g["data_source"] == "leetcode_reasoning"
    r = sft_record(s, FLOW, "TRACE")
    assert [m["role"] for m in r["messages"]] == ["user", "assistant"] and r["messages"][1]["content"] == "TRACE"
    json.dumps(r)


def test_split_generated_holds_out_whole_shapes_then_whole_functions():
    from codethinker.data.shapes import shape_key, split_generated

    bodies = ["return x + {}", "return x * {}", "return x - {}", "return [x] * {}", "return -x + {}"]  # one size
    samples = [
        {"task_id": f"synth/{i}", "id": f"synth/{i}/{j}", "code": f"def f(x):\n    {bodies[i % 5].format(i)}\n"}
        for i in range(30)
        for j in range(1 + i % 3)
    ]
    parts = split_generated(samples, seed=0, n_ood=6, n_id=5, n_grpo=7)
    fns = {k: {s["task_id"] for s in v} for k, v in parts.items()}
    assert [len(fns[k]) for k in ("shape_disjoint", "in_distribution", "grpo", "sft")] == [6, 5, 7, 12]
    assert sum(len(v) for v in parts.values()) == len(samples)
    shapes = {k: {shape_key(s["code"]) for s in v} for k, v in parts.items()}
    train = shapes["sft"] | shapes["grpo"]
    assert not shapes["shape_disjoint"] & (train | shapes["in_distribution"])  # whole shapes: 6 = one shape
    assert shapes["in_distribution"] <= train
    assert split_generated(samples, seed=0, n_ood=6, n_id=5, n_grpo=7) == parts
    assert split_generated(samples, seed=3, n_ood=6, n_id=5, n_grpo=7)["shape_disjoint"] != parts["shape_disjoint"]
    others = [samples[0]["code"]]  # a shape that trains elsewhere is never held out
    assert shape_key(others[0]) not in {
        shape_key(s["code"]) for s in split_generated(samples, 0, 6, 5, 7, others=others)["shape_disjoint"]
    }


def test_teacher_none_keeps_the_true_trace_with_empty_thoughts():
    kept, rejected = extract_traces([FLOW], teacher="none")
    assert kept == [render_trace(FLOW)] and not rejected
    assert "[THOUGHT]\n[/THOUGHT]" in kept[0]
    assert check_trace(kept[0], FLOW) == "empty_thought"  # the template/llm teachers still need thoughts
    assert check_trace(kept[0], FLOW, require_thoughts=False) is None
    with pytest.raises(ValueError, match="'template', 'none' or 'llm'"):
        extract_traces([FLOW], teacher="oracle")


def test_records_carry_the_source_and_prompt_style():
    s = {"id": "synth/3/0", "task_id": "synth/3", "truth": FLOW.to_json()}
    g = grpo_record(s, "leetcode_reasoning", "eval", 0, prompt="bare")
    assert g["extra_info"]["source"] == "synth"
    assert g["prompt"][0]["content"].startswith("[CODE]\n[LINENO 0]")
    r = sft_record(s, FLOW, "TRACE", prompt="bare")
    assert r["source"] == "synth" and r["messages"][0]["content"] == g["prompt"][0]["content"]
