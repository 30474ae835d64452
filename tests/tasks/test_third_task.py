"""A third task added as a fixture (tests/tasks/toy_input_task.py): the task contract is all the trainer, the
evaluator and the config need. One GRPO step trains on it and train_eval scores it, with no change to either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codethinker.tasks import get_task
from codethinker.training.grpo import grpo_params

NAME = "tests.tasks.toy_input_task:InputPrediction"
PROGRAMS = [
    ("def f(x):\n    return x + 1", "1", "2"),
    ("def f(s):\n    return s * 2", "'ab'", "'abab'"),
    ("def f(a, b):\n    return [a, b]", "3, 4", "[3, 4]"),
    ("def f(x):\n    return len(x)", "[1, 2, 3]", "3"),
]


@pytest.fixture
def toy_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "toy.jsonl"
    rows = [
        {"id": f"p{i}", "code": c, "input": inp, "output": out, "split": "train" if i < 2 else "heldout"}
        for i, (c, inp, out) in enumerate(PROGRAMS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class TestTheContract:
    def test_the_task_is_found_by_its_import_path_and_checked(self):
        task = get_task(NAME)
        assert task.rewards == ("input_match",)
        with pytest.raises(ValueError, match=r"unknown task 'nope'"):
            get_task("nope")
        with pytest.raises(ValueError, match=r"cannot import tests.tasks.absent:X"):
            get_task("tests.tasks.absent:X")
        with pytest.raises(ValueError, match=r"lacks .*score"):
            get_task("codethinker.rewards.score:Score")  # a class that is no task

    def test_params_pick_it_and_refuse_a_reward_it_lacks(self):
        p = grpo_params({"task": NAME, "reward": "input_match"})
        assert p.reward_spec().format == "input"
        with pytest.raises(ValueError, match=r"grpo.reward=crm is a reward of task output_prediction"):
            grpo_params({"task": NAME, "reward": "crm"})

    def test_its_reward_runs_the_answer_in_the_sandbox_and_compares_outside(self, toy_jsonl):
        task = get_task(NAME)
        rows = task.rows(toy_jsonl, "heldout")
        spec = task.reward_spec("input_match", {})
        texts = ["[ANSWER]f(3, 4)[/ANSWER]", "[ANSWER]f([0, 0, 0])[/ANSWER]", "f(1)", "[ANSWER]f(open('x'))[/ANSWER]"]
        judged = task.score(spec, texts, [rows[0]["truth"], rows[1]["truth"], rows[0]["truth"], rows[1]["truth"]])
        assert [j.score.reward for j in judged] == [2.0, 2.0, 0.0, 0.0]
        assert [j.score.fmt for j in judged] == [1, 1, 0, 0]  # no answer group; a call that is no literal

    def test_an_answer_cannot_forge_equality(self, toy_jsonl):
        """An object whose __eq__ says yes never reaches the comparison: arguments are literals, and the value
        comes back as plain data compared on this side."""
        task = get_task(NAME)
        rows = task.rows(toy_jsonl, "heldout")
        forged = "[ANSWER]f(type('X', (), {'__eq__': lambda s, o: True})())[/ANSWER]"
        [j] = task.score(task.reward_spec("input_match", {}), [forged], [rows[1]["truth"]])
        assert j.score.reward == 0.0 and j.score.fmt == 0


@pytest.mark.slow
def test_one_grpo_step_and_train_eval_on_the_third_task(tiny_model, toy_jsonl, tmp_path):
    from codethinker.training.grpo_local import run_grpo_local
    from codethinker.training.train_eval import EvalParams, run_train_eval

    p = grpo_params(
        {
            "task": NAME,
            "reward": "input_match",
            "max_steps": 1,
            "prompts_per_step": 1,
            "micro_batch": 4,
            "rollout_engine": "hf",
            "lora": {"r": 8, "alpha": 16},
            "rollout": {"n_regular": 2, "n_dbs": 2, "max_completion_tokens": "auto"},
        }
    )
    csv = tmp_path / "plots" / "grpo_reward.csv"
    m = run_grpo_local(tiny_model, toy_jsonl, tmp_path / "grpo", p, plot_csv=csv)
    assert (m["task"], m["reward"], m["prompt_format"], m["steps"], m["prompts"]) == (
        NAME,
        "input_match",
        "input",
        1,
        2,
    )
    assert m["n_dbs"] == 0 and m["max_completion_tokens"] == 16 + 2 * len("'ab'")  # no blocks: all regular
    head, row = csv.read_text().splitlines()
    values = dict(zip(head.split(","), row.split(","), strict=True))
    assert values["reward_regular_mean"] == "0.0" and values["fmt_rate"] != ""  # a random policy answers nothing
    merged = tmp_path / "grpo" / "merged"
    assert (merged / "config.json").is_file()

    rows = get_task(NAME).rows(toy_jsonl, "heldout")
    ep = EvalParams(task=NAME, reward="input_match", engine="hf", max_tokens="auto", seed=0)
    out = run_train_eval({"after_sft": str(tiny_model), "after_grpo": str(merged)}, rows, ep)
    assert (out["reward_kind"], out["prompt_format"], out["max_tokens"]) == ("input_match", "input", {"heldout": 34})
    for phase in ("after_sft", "after_grpo"):
        h = out[phase]["heldout"]
        assert h["n"] == 2 and h["reward"] == 0.0 and h["reward_ci_low"] <= h["reward"] <= h["reward_ci_high"]
    assert out["grpo_vs_sft"]["heldout"]["reward_diff"] == 0.0
