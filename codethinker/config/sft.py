"""params.yaml's ``sft`` section as a frozen dataclass for :func:`codethinker.config.load_config`
(docs/training.md): the policy trained beside the trainer's own :class:`SFTParams` (inline: its keys
sit in the section); left out or null, ``seed`` is ``base.seed`` and ``model`` is ``model.base``. The files
the stage reads and writes are its command's arguments (dvc.yaml), not parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.config.loader import ParamsFile, Section, fill, inline
from codethinker.training.sft import SFTParams

__all__ = ["SFTConfig"]


@dataclass(frozen=True)
class SFTConfig(Section):
    SECTION: ClassVar[str] = "sft"
    model: str | None = field(default=None, metadata={"help": "the policy trained (None: model.base)"})
    params: SFTParams = field(
        default_factory=SFTParams, metadata=inline("the trainer's settings (seed None: base.seed)")
    )

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        return fill(raw, seed=params.base.seed, model=params.policy)

    def inactive(self) -> set[str]:
        return set() if self.params.finetune == "lora" else {"lora"}
