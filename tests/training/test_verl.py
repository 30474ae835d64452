"""verl backend: the configuration written from params.yaml, and the checks that need verl itself
(run in .venv-verl, which `scripts/make_verl_env.sh` makes: verl 0.9.1 caps transformers < 5.11)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from codethinker.training.grpo import grpo_params
from codethinker.training.grpo_verl import agent_loop_yaml, run_grpo_verl, verl_overrides

ROOT = Path(__file__).resolve().parents[2]
VERL_PY = Path(os.environ.get("VERL_PYTHON", ROOT / ".venv-verl" / "bin" / "python"))


def test_overrides_follow_the_paper_settings(tmp_path):
    p = grpo_params(
        {
            "prompts_per_step": 32,
            "rollout": {"n_regular": 4, "n_dbs": 4},
            "lora": {"r": 64, "alpha": 128},
            "verl": {"nnodes": 4, "overrides": ["trainer.foo=1"]},
        }
    )
    ov = dict(o.split("=", 1) for o in verl_overrides("m", "train.parquet", None, tmp_path, p, tmp_path / "a.yaml"))
    assert ov["actor_rollout_ref.rollout.n"] == "8" and ov["algorithm.adv_estimator"] == "grpo"
    assert ov["actor_rollout_ref.actor.use_kl_loss"] == "false" and ov["algorithm.use_kl_in_reward"] == "false"
    assert ov["actor_rollout_ref.actor.entropy_coeff"] == "0.0"
    assert ov["actor_rollout_ref.model.lora_rank"] == "64" and ov["trainer.nnodes"] == "4"
    assert ov["reward.custom_reward_function.name"] == "compute_score"
    assert "mlflow" in ov["trainer.logger"] and ov["trainer.foo"] == "1"
    assert '"n_dbs": 4' in agent_loop_yaml(p)


def test_dry_run_writes_the_command(tmp_path):
    p = grpo_params({"backend": "verl", "verl": {"dry_run": True}})
    m = run_grpo_verl("models/base", "train.parquet", tmp_path, p)
    assert m["launched"] is False
    cmd = (tmp_path / "verl" / "command.sh").read_text()
    assert "verl.trainer.main_ppo" in cmd and "actor_rollout_ref.rollout.n=8" in cmd


@pytest.mark.verl
@pytest.mark.slow
def test_checks_inside_the_verl_environment():
    if not VERL_PY.exists():
        pytest.skip(f"{VERL_PY} is absent: run scripts/make_verl_env.sh (make verl-env)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [str(VERL_PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/training/verl_env"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    assert "3 passed" in r.stdout
