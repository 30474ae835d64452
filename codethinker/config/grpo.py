"""params.yaml's ``grpo`` and ``train_eval`` sections as frozen dataclasses for
:func:`codethinker.config.load_config` (docs/training.md).

The models a stage uses (``grpo.init``, ``train_eval.models``) sit beside the trainer's own parameters
(:class:`GRPOParams`, :class:`EvalParams`, inline: their keys sit in the section). What a section takes from
others when it leaves it out (or null) is in ``derive``: the seed from ``base.seed``, the policy from
``model.base``, ``trace_thoughts`` from ``contra_sft.teacher`` and, for train_eval, the reward GRPO trained with.
The files the stages read and write are their command's arguments in dvc.yaml, not parameters: so is
:attr:`GRPOParams.reward_model <codethinker.training.grpo.GRPOParams.reward_model>` (the grpo stage's
``--reward-model``), which params.yaml may not set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.config.data import ContraSFTConfig
from codethinker.config.loader import ConfigError, ParamsFile, Section, fill, inline
from codethinker.training.grpo import GRPOParams
from codethinker.training.train_eval import EvalParams

__all__ = ["TRAIN_EVAL_MODELS", "GRPOConfig", "TrainEvalConfig", "judge_limits", "trace_thoughts"]

# train_eval's phases and their models (None: model.base)
TRAIN_EVAL_MODELS: dict[str, str | None] = {
    "before_sft": None,
    "after_sft": "models/sft/merged",
    "after_grpo": "models/grpo/merged",
}


def judge_limits(params: ParamsFile) -> dict[str, Any]:
    """The code-generation judge's limits as params.yaml's ``codegen`` section sets them."""
    from dataclasses import asdict

    from codethinker.config.codegen import CodegenConfig

    return asdict(params.section(CodegenConfig, missing_ok=True).judge)


def trace_thoughts(params: ParamsFile) -> bool:
    """Whether the policy's SFT traces carry thoughts (``contra_sft.teacher`` is not ``none``): the
    stages that size a response budget from the truths read it."""
    return params.section(ContraSFTConfig, missing_ok=True).teacher != "none"


@dataclass(frozen=True)
class GRPOConfig(Section):
    SECTION: ClassVar[str] = "grpo"
    init: str | None = field(default=None, metadata={"help": "the policy GRPO starts from (None: model.base)"})
    params: GRPOParams = field(
        default_factory=GRPOParams,
        metadata=inline("the trainer's settings (seed None: base.seed; trace_thoughts: from contra_sft.teacher)"),
    )

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        if "reward_model" in raw:
            raise ConfigError(
                f"{params.path}: grpo.reward_model: a path, not a parameter: the grpo stage's --reward-model (dvc.yaml)"
            )
        values = {"seed": params.base.seed, "init": params.policy, "trace_thoughts": trace_thoughts(params)}
        return fill(raw, **values, judge=judge_limits(params))

    def inactive(self) -> set[str]:
        p = self.params
        drop = {"lora"} if p.finetune != "lora" else set()
        drop |= {"verl"} if p.backend != "verl" else set()
        drop |= {k for k in ("whitebox", "reflexicoder") if p.reward != k}
        return drop


@dataclass(frozen=True)
class TrainEvalConfig(Section):
    SECTION: ClassVar[str] = "train_eval"
    models: dict[str, str | None] = field(
        default_factory=lambda: dict(TRAIN_EVAL_MODELS),
        metadata={"help": "phase -> model folder or hub id (before_sft None: model.base)"},
    )
    params: EvalParams = field(
        default_factory=EvalParams,
        metadata=inline("the evaluation's settings (seed: base.seed; reward, whitebox: grpo's unless set here)"),
    )

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        grpo = params.section(GRPOConfig).params  # the reward the policy was trained with
        values = {"seed": params.base.seed, "trace_thoughts": trace_thoughts(params)}
        reward = grpo.reward if grpo.task == "reasoning" else "crm"  # codegen policies: codegen_eval scores them
        out = fill(raw, **values, reward=reward, whitebox=grpo.whitebox, sampled_temperature=grpo.rollout.temperature)
        models = TRAIN_EVAL_MODELS if raw.get("models") is None else raw["models"]
        if isinstance(models, dict):  # anything else: the loader names the wrong type
            out["models"] = {**models, "before_sft": models.get("before_sft") or params.policy}
        return out
