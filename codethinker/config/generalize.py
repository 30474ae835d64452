"""params.yaml's ``generalize`` section as a frozen dataclass for :func:`codethinker.config.load_config`
(docs/evaluation.md "Generalization"): the benchmarks and the harness's own :class:`GenConfig`, inline
(its keys sit in the section; seed: ``base.seed``). The models and engine are ``evaluate``'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.config.loader import ParamsFile, Section, fill, inline
from codethinker.evaluation.generalize import GenConfig

__all__ = ["GeneralizeConfig"]

# generalize.benchmarks' default: paper Tables 4 and 12 (cruxeval-x: its 19 languages)
BENCHMARKS = (
    *("cruxeval-i", "reval-co", "reval-c", "reval-p", "reval-s", "cruxeval-x"),
    *("humaneval", "humaneval+", "mbpp", "mbpp+", "gsm8k", "gsm-hard", "math500", "lcb-cg"),
)


@dataclass(frozen=True)
class GeneralizeConfig(Section):
    SECTION: ClassVar[str] = "generalize"
    benchmarks: list[str] = field(
        default_factory=lambda: list(BENCHMARKS), metadata={"help": "benchmark names (cruxeval-x: all 19)"}
    )
    truth_limit: int | None = field(
        default=None, metadata={"help": "generalize_truth: references checked per benchmark (None: all)"}
    )
    cache_dir: str = field(
        default="data/downloads", metadata={"help": "where a benchmark missing from base.mirror is downloaded"}
    )
    sampling: GenConfig = field(
        default_factory=GenConfig, metadata=inline("n, temperature, max_tokens, limit (seed: base.seed)")
    )

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        return fill(raw, seed=params.base.seed)
