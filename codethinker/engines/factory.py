"""One way to open a generation engine: :func:`open_engine` (re-exported by :mod:`codethinker.engines`).

Evaluation (:func:`codethinker.evaluation.harness.open_engine`, a ``ModelSpec`` unpacked), the GRPO
rollouts (:mod:`codethinker.training.grpo_local`) and the train-time evaluation
(:mod:`codethinker.training.train_eval`) all open their engines here:

- ``vllm``: :class:`~codethinker.engines.vllm.VLLMEngine` (CPU or CUDA build); an ``adapter`` goes
  through ``LoRARequest`` (``set_lora``), and ``enable_lora`` defaults to having one;
- ``hf``: :class:`~codethinker.engines.hf.HFEngine` (transformers' generate; ``batch_size``, ``cache``:
  dynamic, static or compiled); an ``adapter`` is merged into the model with PEFT; vLLM's own options are
  dropped;
- ``openai``: :class:`~codethinker.engines.openai.OpenAIEngine` on ``base_url`` (an option), the
  model served under the name ``model``;
- ``auto``: vLLM where it is installed, else transformers (:func:`resolve_backend`).

Options whose value is ``None`` are dropped (the engine's default applies), except ``kv_cache_gib``,
where ``None`` means vLLM's share of memory. ``kv_params`` names the params of the KV-cache options
in vLLM's errors: a :class:`~codethinker.engines.kv_cache.KVParamNames`, or the params section they
come from (``"evaluate.engine"``).

>>> eng = open_engine("models/base", "vllm", "models/sft/adapter", kv_params="evaluate.engine")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any

from codethinker.engines.base import Engine

__all__ = ["BACKENDS", "HF_ONLY", "VLLM_ONLY", "open_engine", "resolve_backend"]

BACKENDS = ("vllm", "hf", "openai")
VLLM_ONLY = frozenset(
    {
        "gpu_memory_utilization",
        "kv_cache_gib",
        "max_num_seqs",
        "max_model_len",
        "enforce_eager",
        "enable_chunked_prefill",
        "enable_lora",
        "max_lora_rank",
        "weight_sync",
        "sleep_mode",
        "kv_params",
        "seed",
        "in_process",
    }
)  # engine options that mean nothing to transformers' generate
HF_ONLY = frozenset({"batch_size", "device", "cache"})  # ... and options vLLM's engine does not take


def resolve_backend(backend: str) -> str:
    """``auto`` -> ``vllm`` when vLLM is installed, else ``hf``; any other name is checked."""
    if backend == "auto":
        try:
            import vllm  # noqa: F401

            return "vllm"
        except ImportError:
            return "hf"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)} or auto, got {backend!r}")
    return backend


def open_engine(
    model: str | os.PathLike[str], backend: str = "vllm", adapter: str | os.PathLike[str] | None = None, **opts: Any
) -> Engine:
    """An engine for ``model`` (a local folder or hub id) on ``backend``, sampling with ``adapter``
    (a PEFT LoRA folder) when one is given; ``opts`` go to the engine class (module docstring)."""
    backend = resolve_backend(backend)
    opts = {k: v for k, v in opts.items() if v is not None or k == "kv_cache_gib"}
    if backend == "vllm":
        return _open_vllm(model, adapter, opts)
    if backend == "hf":
        return _open_hf(model, adapter, {k: v for k, v in opts.items() if k not in VLLM_ONLY})
    from codethinker.engines.openai import OpenAIEngine

    if adapter is not None:
        raise ValueError("the openai backend serves adapters under their own model name: pass that as the model")
    if "base_url" not in opts:
        raise ValueError("the openai backend needs base_url= (the server's /v1 address)")
    return OpenAIEngine(opts.pop("base_url"), str(model), **opts)


def _open_vllm(model: str | os.PathLike[str], adapter: str | os.PathLike[str] | None, opts: dict[str, Any]) -> Engine:
    from codethinker.engines.kv_cache import KVParamNames
    from codethinker.engines.vllm import VLLMEngine

    if isinstance(opts.get("kv_params"), str):
        opts["kv_params"] = KVParamNames.under(opts["kv_params"])
    opts.setdefault("enable_lora", adapter is not None)
    engine = VLLMEngine(model, **{k: v for k, v in opts.items() if k not in HF_ONLY})
    if adapter is not None:
        engine.set_lora(adapter)
    return engine


def _open_hf(model: str | os.PathLike[str], adapter: str | os.PathLike[str] | None, opts: dict[str, Any]) -> Engine:
    from codethinker.engines.hf import HFEngine

    if adapter is None:
        return HFEngine(model, **opts)
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(str(model))
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    return HFEngine(merged, AutoTokenizer.from_pretrained(str(model)), **opts)
