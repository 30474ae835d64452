"""params.yaml's ``codegen`` section (the code-generation task: stages ``codegen_data`` and
``codegen_truth``, docs/codegen.md) as a frozen dataclass for :func:`codethinker.config.load_config`.

The similarity rule is the ``dedup`` stage's: ``model``, ``threshold``, ``batch_size`` and
``cache_dir`` left out (or null) here are taken from params.yaml's ``dedup`` section. The judge's
limits (:class:`~codethinker.codegen.judge.JudgeLimits`) sit inline in the section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.codegen.judge import JudgeLimits
from codethinker.config.data import DedupConfig
from codethinker.config.loader import ParamsFile, Section, fill, inline

__all__ = ["CodegenConfig"]


@dataclass(frozen=True)
class CodegenConfig(Section):
    SECTION: ClassVar[str] = "codegen"
    leetcode: list[str] = field(
        default_factory=lambda: ["v0.1.0-train", "v0.2.0-train"],
        metadata={"help": "LeetCodeDataset train splits; a task_id in both keeps the newer record"},
    )
    test_splits: list[str] = field(
        default_factory=lambda: ["v0.1.0-test", "v0.2.0-test", "v0.3.0-test", "v0.3.1-test"],
        metadata={"help": "LeetCodeDataset test splits: their problems are dropped from training (slug, id)"},
    )
    benchmarks: list[str] = field(
        default_factory=lambda: ["humaneval", "humaneval+", "mbpp", "mbpp+"],
        metadata={"help": "code-generation benchmarks whose canonical solutions training solutions must not resemble"},
    )
    limit: int | None = field(
        default=None, metadata={"help": "problems sampled by base.seed after the id filter (None: all)"}
    )
    heldout: float = field(default=0.1, metadata={"help": "share of the kept problems held out for evaluation"})
    truth_limit: int | None = field(
        default=None, metadata={"help": "codegen_truth: reference solutions judged (None: every problem)"}
    )
    model: str | None = field(default=None, metadata={"help": "sentence embedding model (None: dedup.model)"})
    threshold: float | None = field(
        default=None, metadata={"help": "drop at this cosine similarity or more (None: dedup.threshold)"}
    )
    batch_size: int | None = field(default=None, metadata={"help": "texts per embedding batch (None: dedup's)"})
    embed_cache: str | None = field(
        default=None, metadata={"help": "embeddings keyed by (model, texts) (None: dedup.cache_dir)"}
    )
    download: bool = field(default=True, metadata={"help": "fetch what the mirror lacks from its pinned URL"})
    cache_dir: str = field(default="data/downloads", metadata={"help": "where downloads are kept"})
    judge: JudgeLimits = field(
        default_factory=JudgeLimits, metadata=inline("test_timeout_s, setup_timeout_s, memory_mb, workers")
    )

    def __post_init__(self) -> None:
        if not 0 <= self.heldout < 1:
            raise ValueError("heldout must be in [0, 1)")
        if (self.limit is not None and self.limit < 1) or (self.truth_limit is not None and self.truth_limit < 1):
            raise ValueError("limit and truth_limit must be >= 1 or null")

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        dedup = params.section(DedupConfig, missing_ok=True)
        return fill(
            raw, model=dedup.model, threshold=dedup.threshold, batch_size=dedup.batch_size, embed_cache=dedup.cache_dir
        )
