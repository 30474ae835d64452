"""params.yaml's ``grpo``, ``grpo_codegen`` and ``train_eval`` sections as frozen dataclasses for
:func:`codethinker.config.load_config` (docs/training.md; ``grpo_codegen``: docs/codegen.md).

The models a stage uses (``grpo.init``, ``train_eval.models``) sit beside the trainer's own parameters
(:class:`GRPOParams`, :class:`EvalParams`, inline: their keys sit in the section). What a section takes from
others when it leaves it out (or null) is in ``derive``: the seed from ``base.seed``, the policy from
``model.base``, ``trace_thoughts`` from ``contra_sft.teacher`` and, for train_eval, the reward GRPO trained with.
The files the stages read and write are their command's arguments in dvc.yaml, not parameters: so is
:attr:`GRPOParams.reward_model <codethinker.training.grpo.GRPOParams.reward_model>` (the grpo_codegen stage's
``--reward-model``), which params.yaml may not set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.config.data import ContraSFTConfig
from codethinker.config.loader import ConfigError, ParamsFile, Section, fill, inline
from codethinker.training.grpo import GRPOParams
from codethinker.training.train_eval import EvalParams

__all__ = ["TRAIN_EVAL_MODELS", "GRPOCodegenConfig", "GRPOConfig", "TrainEvalConfig", "judge_limits", "trace_thoughts"]

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
        from codethinker.tasks import get_task

        name = raw.get("task") or GRPOParams.task
        try:
            section = get_task(name).section
        except ValueError as exc:
            raise ConfigError(f"{params.path}: grpo.task: {exc}") from None
        if section != cls.SECTION:  # the task has a stage of its own (code generation: the reward model's)
            raise ConfigError(
                f"{params.path}: grpo.task: {name} is trained by the {section} stage, whose section {section} takes "
                "grpo's settings (docs/codegen.md)"
            )
        return _derive(cls.SECTION, raw, params)

    def inactive(self) -> set[str]:
        p = self.params
        drop = {"lora"} if p.finetune != "lora" else set()
        drop |= {"verl"} if p.backend != "verl" else set()
        drop |= {k for k in ("whitebox", "reflexicoder") if p.reward != k}
        from codethinker.tasks import TASKS, get_task

        every = {key for name in TASKS for key in get_task(name).settings}
        return drop | (every - set(p.task_obj.settings))  # the reward settings of the other tasks


def _derive(section: str, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
    if "reward_model" in raw:
        raise ConfigError(
            f"{params.path}: {section}.reward_model: a path, not a parameter: the grpo_codegen stage's "
            "--reward-model (dvc.yaml)"
        )
    values = {"seed": params.base.seed, "init": params.policy, "trace_thoughts": trace_thoughts(params)}
    return fill(raw, **values, judge=judge_limits(params))


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` on top, nested mappings key by key (``rollout: {n_dbs: 0}`` keeps grpo's other
    rollout keys); a null in ``over`` keeps ``base``'s value."""
    out = dict(base)
    for key, value in over.items():
        if value is None:  # null: base's
            continue
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out


@dataclass(frozen=True)
class GRPOCodegenConfig(GRPOConfig):
    """``grpo_codegen``: GRPO on code generation (stage grpo_codegen, docs/codegen.md "GRPO recipes"). Every key
    it leaves out (or sets null) is ``grpo``'s (the same policy, backend, schedule and rollout); ``reward`` is one
    of the code-generation rewards (codegen_outcome when left out); the task is codegen."""

    SECTION: ClassVar[str] = "grpo_codegen"

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        if "task" in raw:
            raise ConfigError(f"{params.path}: grpo_codegen.task: this section's task is codegen; leave the key out")
        grpo = params.data.get("grpo")
        grpo = {k: v for k, v in grpo.items() if k not in REASONING_ONLY} if isinstance(grpo, dict) else {}
        merged = _merged({**grpo, "reward": "codegen_outcome"}, raw)  # a null: grpo's
        return _derive(cls.SECTION, {**merged, "task": "codegen"}, params)


# grpo's keys that mean nothing for code generation (its reward is its own; sources: of the reasoning prompts)
REASONING_ONLY = ("task", "reward", "crm", "whitebox", "reward_model", "sources")


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
        trained = {"task": grpo.task, "reward": grpo.reward, "whitebox": grpo.whitebox}
        out = fill(raw, **values, **trained, sampled_temperature=grpo.rollout.temperature)
        models = TRAIN_EVAL_MODELS if raw.get("models") is None else raw["models"]
        if isinstance(models, dict):  # anything else: the loader names the wrong type
            out["models"] = {**models, "before_sft": models.get("before_sft") or params.policy}
        return out
