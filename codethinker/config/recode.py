"""params.yaml's ``recode`` section (ReCode: stages ``crpl_data`` and ``reward_model``, docs/recode.md) as a
frozen dataclass for :func:`codethinker.config.load_config`.

``crpl_data`` reads the kept problems of ``codegen_data`` (and ``codegen``'s splits and judge limits);
``reward_model`` trains :class:`~codethinker.training.reward_model.RewardModelParams` (the ``rm`` mapping)
on its pairs. Left out or null, ``model`` is ``model.base`` (the bootstrap stage's tiny policy). The files both
stages read and write (the pairs, the reward model's folder) are their command's arguments in dvc.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.config.loader import ParamsFile, Section, fill
from codethinker.data.llm import ChatConfig
from codethinker.training.reward_model import RewardModelParams

__all__ = ["RecodeConfig"]

TEACHER = "Qwen/Qwen2.5-Coder-32B-Instruct"  # the paper's CRPL generator


@dataclass(frozen=True)
class RecodeConfig(Section):
    SECTION: ClassVar[str] = "recode"
    backend: str = field(
        default="offline", metadata={"help": "offline (rule-based edits of real responses) | llm (the teacher)"}
    )
    limit: int | None = field(default=None, metadata={"help": "codegen problems used, in file order (None: all)"})
    bug_tries: int = field(default=3, metadata={"help": "offline: seeded one-token code bugs judged per problem"})
    cache_dir: str | None = field(
        default="data/llm_cache", metadata={"help": "answers of the llm teacher (None: no cache)"}
    )
    llm: ChatConfig = field(
        default_factory=lambda: ChatConfig(model=TEACHER, max_tokens=4096),
        metadata={"help": "the llm teacher's endpoint and sampling"},
    )
    model: str | None = field(
        default=None, metadata={"help": "reward model's base: a HF id or local folder (None: model.base)"}
    )
    rm: RewardModelParams = field(default_factory=RewardModelParams, metadata={"help": "the reward model's training"})

    def __post_init__(self) -> None:
        if self.backend not in ("offline", "llm"):
            raise ValueError(f"recode.backend must be offline or llm, got {self.backend!r}")
        if (self.limit is not None and self.limit < 1) or self.bug_tries < 1:
            raise ValueError("recode.limit must be >= 1 or null, bug_tries >= 1")

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        return fill(raw, model=params.policy)
