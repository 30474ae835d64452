"""verl's launch config for ReCode's kinds (``grpo.reward``: cg_grpo, cg_grpo_ungated, recode_outcome): the
reward-kwargs override parses as hydra parses it, and verl's binding of those kwargs to ``compute_score``
hands the CRPL reward model's absolute path to the reward.

verl itself is not needed here: hydra's own override parser reads the line (hydra-core is in this
environment too), and the binding is verl 0.9.1's ``get_custom_reward_fn``: ``partial(fn, **reward_kwargs)``,
called with ``data_source``, ``solution_str``, ``ground_truth`` and ``extra_info``. The composed config and
the real loader are checked in .venv-verl (tests/training/verl_env)."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from codethinker.rewards import codegen_switch
from codethinker.training.grpo import grpo_params
from codethinker.training.grpo_verl import _hydra_str, reward_kwargs, run_grpo_verl

from .test_grpo_codegen import GOOD, LIMITS, problems_jsonl  # noqa: F401  (a fixture)

KWARGS_KEY = "++reward.custom_reward_function.reward_kwargs"


def _parsed(line: str) -> dict:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    override = OverridesParser.create().parse_override(line)
    assert override.key_or_group == "reward.custom_reward_function.reward_kwargs"
    return override.value()


@pytest.mark.parametrize(
    "text", ["/runs/rm", "/runs/a b/c:d,e", "/runs/it's", "C:\\dir\\", "/a/b\\c", "x\\'y", "{k:v}", "a=b,[1]"]
)
def test_a_quoted_hydra_string_parses_back_to_itself(text):
    assert _parsed(f"{KWARGS_KEY}={{reward_model:{_hydra_str(text)}}}") == {"reward_model": text}


@pytest.mark.parametrize("kind", ["cg_grpo", "cg_grpo_ungated", "recode_outcome"])
def test_recode_kinds_launch_and_compute_score_gets_the_reward_models_path(kind, tmp_path, monkeypatch, problems_jsonl):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    rm_dir = tmp_path / "runs, v1" / "reward model"  # a path hydra would split unquoted
    rm_dir.mkdir(parents=True)
    over = {"backend": "verl", "verl": {"dry_run": True}, "rollout": {"max_completion_tokens": 256}}
    p = grpo_params({"task": "codegen", "reward": kind, "judge": LIMITS, **over})
    p = dataclasses.replace(p, reward_model="runs, v1/reward model")  # relative, as the grpo stage's --reward-model
    run_grpo_verl("models/sft/merged", problems_jsonl, Path("models/grpo"), p)
    cfg_dir = tmp_path / "models" / "grpo" / "verl"
    lines = (cfg_dir / "overrides.txt").read_text().splitlines()
    [line] = [o for o in lines if o.startswith(KWARGS_KEY + "=")]
    assert line == reward_kwargs(p)
    kwargs = _parsed(line)
    assert kwargs["reward"] == kind and kwargs["reward_model"] == str(rm_dir)  # absolute for every node
    assert kwargs["judge"] == {"memory_mb": 2048, "setup_timeout_s": 3.0, "test_timeout_s": 1.0, "workers": 2}

    seen: list[str] = []

    class _RM:
        def score(self, prompts, completions):
            return [0.0] * len(completions)  # sigmoid(0) = 0.5

    monkeypatch.setattr(codegen_switch, "_process_model", lambda path: seen.append(path) or _RM())
    import pandas as pd

    from codethinker.rewards.verl_reward import compute_score

    row = pd.read_parquet(cfg_dir / f"codegen_train.{kind}.parquet").iloc[0]
    fn = functools.partial(compute_score, **kwargs)  # verl's get_custom_reward_fn
    answer = f"<think>Add one to x.</think>\n<answer>\n```python\n{GOOD}```\n</answer>"
    out = fn(
        data_source=row["data_source"],
        solution_str=answer,
        ground_truth=row["reward_model"]["ground_truth"],
        extra_info=dict(row["extra_info"]),
    )
    if kind == "recode_outcome":  # R_fmt + R_out, the model never asked
        assert (out["score"], out["r_proc"], seen) == (2.0, 0.0, [])
    else:  # R_fmt 1 + R_out 1 + R_proc sigmoid(0), from the model at the launch's path
        assert (out["score"], out["r_proc"], seen) == (2.5, 0.5, [str(rm_dir)])
