"""What a stage logs as its params is what its mode reads: no ``lora.*`` for a full fine-tune, no
``verl.*`` on the local backend, no other reward's settings."""

from __future__ import annotations

from pathlib import Path

from codethinker.config import load_config
from codethinker.config.grpo import GRPOConfig
from codethinker.config.sft import SFTConfig

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


def _with(tmp_path: Path, old: str, new: str) -> Path:
    text = PARAMS.read_text()
    assert old in text
    out = tmp_path / "params.yaml"
    out.write_text(text.replace(old, new, 1))
    return out


def test_the_default_full_fine_tune_logs_no_lora_verl_or_other_rewards():
    grpo, sft = load_config(GRPOConfig, PARAMS).as_dict(), load_config(SFTConfig, PARAMS).as_dict()
    assert not {"lora", "verl", "whitebox", "reflexicoder"} & set(grpo)
    assert "lora" not in sft and {"learning_rate", "finetune", "crm", "rollout"} <= set(grpo) | set(sft)


def test_the_full_profile_lora_and_a_whitebox_reward_log_theirs(tmp_path):
    grpo = load_config(GRPOConfig, PARAMS, profile="full").as_dict()
    assert grpo["finetune"] == "lora" and "lora" in grpo and "verl" not in grpo
    params = _with(tmp_path, "  reward: crm ", "  reward: whitebox ")
    assert "whitebox" in load_config(GRPOConfig, params).as_dict()
    assert "lora" in load_config(SFTConfig, PARAMS, profile="full").as_dict()
