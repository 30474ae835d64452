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


def _set(tmp_path: Path, section: str, **keys: object) -> Path:
    import yaml

    data = yaml.safe_load(PARAMS.read_text())
    data[section] = {**(data.get(section) or {}), **keys}
    out = tmp_path / "params.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


class TestGRPOCodegenSection:
    """``grpo_codegen`` is grpo's settings under its own: the codegen task, its own reward, nested keys merged."""

    def test_leaves_grpo_s_settings_and_takes_its_own(self):
        from codethinker.config.grpo import GRPOCodegenConfig

        cg, grpo = load_config(GRPOCodegenConfig, PARAMS), load_config(GRPOConfig, PARAMS)
        assert (cg.params.task, cg.params.reward, grpo.params.task, grpo.params.reward) == (
            "codegen", "codegen_outcome", "output_prediction", "crm")  # fmt: skip
        assert cg.params.learning_rate == grpo.params.learning_rate and cg.init == grpo.init
        assert cg.params.rollout.group == grpo.params.rollout.group and cg.params.sources is None  # reasoning data's
        assert (cg.params.prompts_per_step, cg.params.rollout.filter_groups) == (2, False)  # its own default values
        full = load_config(GRPOCodegenConfig, PARAMS, profile="full").params  # null there: grpo's
        assert full.prompts_per_step == load_config(GRPOConfig, PARAMS, profile="full").params.prompts_per_step
        assert "crm" not in cg.as_dict() and "judge" in cg.as_dict() and "judge" not in grpo.as_dict()

    def test_a_nested_key_keeps_grpo_s_other_keys(self, tmp_path):
        from codethinker.config.grpo import GRPOCodegenConfig

        params = _set(tmp_path, "grpo_codegen", rollout={"n_dbs": 0, "temperature": None}, reward="reflexicoder")
        cg = load_config(GRPOCodegenConfig, params)
        grpo = load_config(GRPOConfig, params).params.rollout
        assert cg.params.rollout.n_dbs == 0 and cg.params.rollout.n_regular == grpo.n_regular
        assert cg.params.rollout.temperature == grpo.temperature and cg.params.reward == "reflexicoder"  # null: grpo's

    def test_the_sections_refuse_the_other_task(self, tmp_path):
        import pytest

        from codethinker.config.grpo import GRPOCodegenConfig
        from codethinker.config.loader import ConfigError

        with pytest.raises(ConfigError, match=r"grpo\.task: codegen is trained by the grpo_codegen stage"):
            load_config(GRPOConfig, _set(tmp_path, "grpo", task="codegen"))
        with pytest.raises(ValueError, match="reward=crm is a reward of task output_prediction"):
            load_config(GRPOCodegenConfig, _set(tmp_path, "grpo_codegen", reward="crm"))
        with pytest.raises(ConfigError, match=r"grpo_codegen\.task: this section's task is codegen"):
            load_config(GRPOCodegenConfig, _set(tmp_path, "grpo_codegen", task="codegen"))
