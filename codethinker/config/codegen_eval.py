"""params.yaml's ``codegen_eval`` section (stage ``codegen_eval``: the code-generation policy on the held-out
problems, docs/codegen.md "GRPO recipes") as a frozen dataclass for :func:`codethinker.config.load_config`.

What it takes from other sections when it leaves it out (or null), in ``derive``: the seed from ``base.seed``,
the reward (the prompt format the policy trained in) and ReflexiCoder's coefficients from ``grpo_codegen``,
and the judge's limits from ``codegen``. The problems file is the stage's ``--data``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.config.grpo import GRPOCodegenConfig, judge_limits
from codethinker.config.loader import ParamsFile, Section, fill, inline
from codethinker.training.codegen_eval import CodegenEvalParams

__all__ = ["CodegenEvalConfig"]


@dataclass(frozen=True)
class CodegenEvalConfig(Section):
    SECTION: ClassVar[str] = "codegen_eval"
    models: dict[str, str | None] = field(
        default_factory=lambda: {"after_sft": "models/sft/merged", "after_grpo": "models/grpo_codegen/merged"},
        metadata={"help": "phase -> model folder or hub id"},
    )
    params: CodegenEvalParams = field(
        default_factory=CodegenEvalParams,
        metadata=inline(
            "the evaluation's settings (seed: base.seed; reward, reflexicoder: grpo_codegen's; judge: codegen's)"
        ),
    )

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        grpo = params.section(GRPOCodegenConfig, missing_ok=True).params  # the prompt format the policy trained in
        values = {"seed": params.base.seed, "judge": judge_limits(params)}
        return fill(raw, **values, reward=grpo.reward, reflexicoder=grpo.reflexicoder)
