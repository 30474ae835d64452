"""GRPO on the code-generation task (grpo.task: codegen): the rows of codegen_data's training problems, the
rollout (DBS on code blocks), the batched reward's per-step statistics, one real local step on the tiny
model, verl's written config, and the held-out evaluation (codegen_eval)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codethinker.codegen.reflexion import FORMAT_PROMPT, render_response
from codethinker.codegen.task import ASK, CodegenProblem
from codethinker.engines.base import Completion
from codethinker.rewards import codegen_switch
from codethinker.training import codegen_eval
from codethinker.training.codegen_eval import CodegenEvalParams, run_codegen_eval
from codethinker.training.grpo import grpo_params, resolve_reward
from codethinker.training.grpo_data import load_grpo_rows
from codethinker.training.grpo_verl import agent_loop_yaml, run_grpo_verl
from codethinker.training.reward_func import RewardFunc
from codethinker.training.rollout import Rollout, RolloutParams, prompt_key

from ..sampling.scripted import ScriptedEngine
from .test_grpo import _Tok

GOOD = "class Solution:\n    def add(self, x):\n        return x + 1\n"
WRONG = "class Solution:\n    def add(self, x):\n        return x\n"
LIMITS = {"test_timeout_s": 1.0, "setup_timeout_s": 3.0, "workers": 2}


def problem(i: int, split: str = "train") -> CodegenProblem:
    return CodegenProblem(
        id=f"add-{i}",
        question_id=i,
        difficulty="Easy",
        version="v0.2.0",
        prompt=f"Add one ({i}).\n\n{ASK}",
        preamble="",
        reference=GOOD,
        entry_point="Solution().add",
        tests=("assert candidate(1) == 2", "assert candidate(5) == 6"),
        split=split,
    )


@pytest.fixture()
def problems_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "problems.jsonl"
    probs = [problem(0), problem(1, "heldout"), problem(2), problem(3, "heldout")]
    path.write_text("".join(json.dumps(q.to_json()) + "\n" for q in probs))
    return path


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def codegen(**over):
    return grpo_params({"task": "codegen", "reward": "codegen_outcome", "judge": LIMITS, **over})


def test_rows_are_the_training_problems_in_the_rewards_format(problems_jsonl):
    rows, dropped = load_grpo_rows(problems_jsonl, None, codegen())
    assert [r["id"] for r in rows] == ["add-0", "add-2"] and dropped == 0  # split train only
    assert rows[0]["prompt"] == [{"role": "user", "content": f"Add one (0).\n\n{ASK}"}]
    assert CodegenProblem.from_json(json.loads(rows[0]["truth"])) == problem(0)
    rows, _ = load_grpo_rows(problems_jsonl, None, codegen(reward="reflexicoder", max_prompts=1))
    assert [r["id"] for r in rows] == ["add-0"]
    assert rows[0]["prompt"][0]["content"] == f"Add one (0).\n\n{FORMAT_PROMPT}"


def test_codegen_keeps_dbs_with_code_blocks_and_ends_at_the_end_of_turn():
    r = resolve_reward(codegen()).rollout
    assert (r.n_regular, r.n_dbs, r.block_stop, r.final_stop) == (4, 4, ["\n\n"], [])
    r = resolve_reward(codegen(reward="reflexicoder")).rollout
    assert (r.n_dbs, r.block_stop) == (4, ["</answer>"])


def test_dbs_rollout_keeps_the_budget_on_well_formed_code_prefixes():
    q = problem(0)
    spec = codegen().reward_spec()
    msgs = spec.prompt(q)

    def script(prefix, k, sid):  # first block: broken code for k = 0, a good start for k = 1; then the rest
        if prefix.endswith("<assistant>"):
            return ("```python\nclass Solution(:\n\n" if k == 0 else "```python\nclass Solution:\n\n"), 4, "stop"
        return "    def add(self, x):\n        return x + 1\n```", 6, "stop"

    rollout = Rollout(
        "static",
        ScriptedEngine(script),
        _Tok(),
        {prompt_key(msgs): json.dumps(q.to_json())},
        RolloutParams(n_regular=0, n_dbs=2, block_stop=["\n\n"], final_stop=[], max_completion_tokens=64),
        scorer_for=spec.prefix_scorer,
    )
    _, [row] = rollout.sample([msgs])
    assert [c.text for c in row] == [
        "```python\nclass Solution:\n\n    def add(self, x):\n        return x + 1\n```"
    ] * 2


def test_reward_func_judges_a_step_in_one_batch_and_logs_pass_rate_and_cycles(monkeypatch):
    batches = []
    real = codegen_switch.judge_programs
    monkeypatch.setattr(
        codegen_switch, "judge_programs", lambda p, c, lim=None: batches.append(len(c)) or real(p, c, lim)
    )
    truth = json.dumps(problem(0).to_json())
    f = RewardFunc.from_params(codegen())
    out = f(
        None,
        [fenced(GOOD), fenced(WRONG), fenced(GOOD), "junk"],
        [truth] * 4,
        rollout_kind=["regular"] * 2 + ["dbs"] * 2,
    )
    assert out == [2.0, 1.0, 2.0, 0.0] and batches == [4]
    stats = f.take()
    assert (stats["reward_regular_mean"], stats["reward_dbs_mean"], stats["reward_mean"]) == (1.5, 1.0, 1.25)
    assert (stats["pass_rate"], stats["answer_acc"], stats["fmt_rate"]) == (0.5, 0.5, 0.75)
    assert "cycles" not in stats
    r = RewardFunc.from_params(codegen(reward="reflexicoder"))
    texts = [render_response("p", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nx"]), fenced(GOOD)]
    r(None, texts, [truth] * 2, rollout_kind=["regular", "dbs"])
    stats = r.take()
    assert stats["cycles"] == 0.5 and stats["pass_rate"] == 0.5 and stats["reward_dbs_mean"] == 0.0  # (1 + 0) / 2


@pytest.mark.slow
def test_one_local_codegen_step_on_the_tiny_model(tiny_model, problems_jsonl, tmp_path):
    from codethinker.training.grpo_local import run_grpo_local

    p = codegen(
        max_steps=1,
        prompts_per_step=1,
        micro_batch=4,
        rollout_engine="hf",
        lora={"r": 8, "alpha": 16},
        rollout={"n_regular": 2, "n_dbs": 2, "max_completion_tokens": 12},
    )
    csv = tmp_path / "plots" / "grpo_reward.csv"
    m = run_grpo_local(tiny_model, problems_jsonl, tmp_path / "grpo", p, plot_csv=csv)
    assert (m["task"], m["reward"], m["prompt_format"], m["n_dbs"], m["steps"]) == (
        "codegen",
        "codegen_outcome",
        "codegen",
        2,
        1,
    )
    assert (tmp_path / "grpo" / "merged" / "config.json").is_file()
    head, row = csv.read_text().splitlines()
    values = dict(zip(head.split(","), row.split(","), strict=True))
    assert values["pass_rate"] == "0.0" and values["reward_regular_mean"] != "" and values["reward_dbs_mean"] != ""


def test_verl_writes_the_codegen_data_reward_kwargs_and_dbs_scorer(tmp_path, monkeypatch, problems_jsonl):
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    over = {"backend": "verl", "verl": {"dry_run": True}, "rollout": {"max_completion_tokens": 256}}
    p = codegen(reward="reflexicoder", reflexicoder={"terminal": "solved"}, **over)
    m = run_grpo_verl("models/sft/merged", problems_jsonl, Path("models/grpo"), p)
    cfg_dir = tmp_path / "models" / "grpo" / "verl"
    values = dict(o.lstrip("+").split("=", 1) for o in (cfg_dir / "overrides.txt").read_text().splitlines())
    assert values["reward.custom_reward_function.reward_kwargs"] == (
        "{task:'codegen',reward:reflexicoder,reflexicoder:{terminal:solved},judge:{memory_mb:2048,setup_timeout_s:3.0,test_timeout_s:1.0,workers:2}}"
    )
    data = cfg_dir / "codegen_train.reflexicoder.parquet"
    assert values["data.train_files"] == str(data) and values["trainer.experiment_name"] == "grpo-reflexicoder"
    assert (m["reward"], m["prompt_format"], m["n_regular"], m["n_dbs"]) == ("reflexicoder", "reflexion", 4, 4)
    rows = pd.read_parquet(data)
    assert list(rows["data_source"]) == ["leetcode_codegen"] * 2 and [e["id"] for e in rows["extra_info"]] == [
        "add-0",
        "add-2",
    ]
    truth = rows["reward_model"][0]["ground_truth"]
    loop = json.loads(agent_loop_yaml(p)[2:])
    assert (loop["task"], loop["reward"], loop["block_stop"], loop["final_stop"]) == (
        "codegen", "reflexicoder", ["</answer>"], [])  # fmt: skip
    from codethinker.rewards.verl_reward import compute_score

    kwargs = {"reward": "reflexicoder", "reflexicoder": {"terminal": "solved"}, "judge": LIMITS}
    text = render_response("p", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nx"])
    assert compute_score("leetcode_codegen", text, truth, dict(rows["extra_info"][0]), **kwargs)["cycles"] == 1


class _Engine:
    """Answers every prompt with the scripted texts, in turn."""

    def __init__(self, texts):
        self.texts = texts

    def apply_chat_template(self, messages):
        return messages[-1]["content"]

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        return [[Completion(self.texts[i % len(self.texts)], 10 * (i + 1), "stop")] for i in range(len(prefixes))]

    def close(self):
        pass


def test_codegen_eval_reports_pass1_tokens_and_cycles(monkeypatch, problems_jsonl, tmp_path):
    heldout = codegen_eval.read_problems(problems_jsonl, "heldout")
    assert [q.id for q in heldout] == ["add-1", "add-3"]
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    texts = [render_response("p", [WRONG, GOOD], ["STATUS: BUG_DETECTED\nx"]), fenced(GOOD)]
    monkeypatch.setattr("codethinker.training.train_eval.open_eval_engine", lambda path, p, seqs: _Engine(texts))
    p = CodegenEvalParams(reward="reflexicoder", judge=LIMITS, max_tokens=64)
    out = run_codegen_eval({"after_grpo": str(model), "after_sft": "models/absent"}, heldout, p)
    assert (out["reward_kind"], out["scored_with"], out["prompt_format"], out["problems"]) == (
        "reflexicoder",
        "reflexicoder",
        "reflexion",
        2,
    )
    g = out["after_grpo"]
    # problem 1: a valid trajectory whose last answer passes (1 cycle, 10 tokens); problem 2: one block (F = 0)
    assert (g["pass1"], g["fmt_rate"], g["tokens"], g["cycles"], g["n"]) == (0.5, 0.5, 15.0, 0.5, 2)
    assert out["after_sft"] == {"missing": 1.0}
    recode = f"<think>Add one.</think>\n<answer>\n```python\n{GOOD}```\n</answer>"
    monkeypatch.setattr(
        "codethinker.training.train_eval.open_eval_engine", lambda path, p, seqs: _Engine([recode, fenced(GOOD)])
    )
    p = CodegenEvalParams(reward="cg_grpo", judge=LIMITS, max_tokens=64)  # ReCode's format, no reward model
    out = run_codegen_eval({"after_grpo": str(model)}, heldout, p)
    # both programs pass; only the first answer is in ReCode's <think>/<answer> format
    g = out["after_grpo"]
    assert (out["scored_with"], out["prompt_format"], g["pass1"], g["fmt_rate"]) == (
        "recode_outcome",
        "recode",
        1.0,
        0.5,
    )
    assert "cycles" not in g
