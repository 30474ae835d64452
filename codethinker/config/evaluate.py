"""params.yaml's ``evaluate`` section as a frozen dataclass for :func:`codethinker.config.load_config`
(docs/evaluation.md): the models, the engine (the generalize stages use both too) and the harness's
own :class:`EvalConfig`, inline (its keys sit in the section; seed: ``base.seed``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from codethinker.config.loader import ParamsFile, Section, as_dict, fill, inline
from codethinker.evaluation.harness import EvalConfig, ModelSpec

__all__ = ["EngineConfig", "EvalModel", "EvaluateConfig"]


@dataclass(frozen=True)
class EvalModel:
    """One entry of ``evaluate.models``: one DVC stage evaluate@<name> (and generalize@<name>)."""

    model: str = field(metadata={"help": "model folder or HF hub id"})
    dep: str | None = field(default=None, metadata={"help": "the folder DVC hashes for the stage"})
    adapter: str | None = field(default=None, metadata={"help": "LoRA adapter folder applied on top"})
    format: str = field(default="contra", metadata={"help": "contra | contra-bare | vanilla (evaluate only)"})

    def spec(self, name: str, *, with_format: bool = True) -> ModelSpec:
        """The harness's :class:`ModelSpec`; ``with_format=False``: the default format (generalize)."""
        if with_format:
            return ModelSpec(name, self.model, self.adapter, self.format)
        return ModelSpec(name, self.model, self.adapter)


# evaluate.models' default: the three policies of the pipeline, zero-shot ConTra prompt
MODELS: dict[str, EvalModel] = {
    name: EvalModel(folder, folder)
    for name, folder in {"base": "models/base", "sft": "models/sft/merged", "grpo": "models/grpo/merged"}.items()
}


@dataclass(frozen=True)
class EngineConfig:
    """``evaluate.engine``: the engine both evaluations run the models on (None: the engine's own default)."""

    backend: str = field(default="vllm", metadata={"help": "vllm (CPU or CUDA build) | hf (transformers' generate)"})
    dtype: str | None = field(default="auto", metadata={"help": "model dtype (auto, float32, ...)"})
    enforce_eager: bool | None = field(default=False, metadata={"help": "vLLM: skip torch.compile / CUDA graphs"})
    enable_chunked_prefill: bool | None = field(default=None, metadata={"help": "vLLM: chunked prefill"})
    max_model_len: int | None = field(default=8192, metadata={"help": "vLLM context in tokens"})
    max_num_seqs: int | None = field(default=None, metadata={"help": "vLLM: sequences run at once"})
    kv_cache_gib: float | str | None = field(
        default="auto", metadata={"help": "vLLM CPU build: KV cache in GiB (auto | a number | None: share of RAM)"}
    )
    gpu_memory_utilization: float | None = field(default=None, metadata={"help": "vLLM: share of GPU memory"})

    def options(self) -> dict[str, Any]:
        """The engine's keyword options (all but ``backend``), in params.yaml's order."""
        return {k: v for k, v in as_dict(self).items() if k != "backend"}


@dataclass(frozen=True)
class EvaluateConfig(Section):
    SECTION: ClassVar[str] = "evaluate"
    models: dict[str, EvalModel] = field(
        default_factory=lambda: dict(MODELS), metadata={"help": "name -> the model to evaluate"}
    )
    sampling: EvalConfig = field(
        default_factory=EvalConfig,
        metadata=inline("runs, temperature, max_tokens, limit, batch_size (seed: base.seed)"),
    )
    log_predictions: bool = field(default=True, metadata={"help": "predictions JSONL as MLflow artifacts too"})
    engine: EngineConfig = field(default_factory=EngineConfig, metadata={"help": "the engine's settings"})

    @classmethod
    def derive(cls, raw: dict[str, Any], params: ParamsFile) -> dict[str, Any]:
        return fill(raw, seed=params.base.seed)

    def model(self, name: str, stage: str) -> EvalModel:
        """``models[name]``; an unknown name stops ``stage`` with the names known."""
        if name not in self.models:
            raise SystemExit(f"{stage}: no model {name!r} in evaluate.models; known: {', '.join(self.models)}")
        return self.models[name]
