"""Preflight's GPU check, when the profile trains on GPUs (``grpo.backend: verl``, or a hub policy):
the visible CUDA devices and their free memory against an estimate made from the policy's parameter
count (:func:`gpu_memory_need`, :func:`policy_parameters`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codethinker.config.loader import ParamsFile
from codethinker.preflight.checks import (
    GRPO_STAGES,
    CheckResult,
    PlannedCheck,
    _local,
    _made_by_stages,
    is_hub_id,
    policy,
    trainer_section,
)
from codethinker.preflight.probes import GPUInfo, ProbeError, Probes

if TYPE_CHECKING:
    from codethinker.training.grpo import VerlParams

__all__ = ["KNOWN_PARAMETERS", "MemoryNeed", "gpu_memory_need", "parameters_from_config", "policy_parameters"]

GIB = 1024**3
BF16 = 2  # bytes per parameter
ADAM_FULL = 16  # bf16 weights + bf16 grads + fp32 master weights + Adam m and v, bytes per parameter
HEADROOM = 1.2  # activations, CUDA context, allocator fragmentation

# parameter counts of policies whose config.json may not be at hand (else read from config.json)
KNOWN_PARAMETERS: dict[str, float] = {
    "Qwen/Qwen2.5-Coder-0.5B-Instruct": 0.49e9,
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": 1.54e9,
    "Qwen/Qwen2.5-Coder-3B-Instruct": 3.09e9,
    "Qwen/Qwen2.5-Coder-7B-Instruct": 7.6e9,
    "Qwen/Qwen2.5-Coder-7B": 7.6e9,
    "Qwen/Qwen2.5-Coder-14B-Instruct": 14.7e9,
    "Qwen/Qwen2.5-Coder-32B-Instruct": 32.8e9,
    "Qwen/Qwen3-8B": 8.2e9,
    "Qwen/Qwen3-32B": 32.8e9,
}


@dataclass(frozen=True)
class MemoryNeed:
    """Free memory a training GPU needs: ``fixed_bytes`` plus ``device_share`` of its total memory
    (vLLM's ``gpu_memory_utilization`` in verl: vLLM refuses to start with less free)."""

    fixed_bytes: float
    device_share: float
    explanation: str

    def per_device(self, total_bytes: float) -> float:
        return self.fixed_bytes + self.device_share * total_bytes


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _count(n: float) -> str:
    """``7.6e9`` -> ``7.6B``, ``1.02e6`` -> ``1.02M``."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def parameters_from_config(cfg: Mapping[str, Any]) -> float | None:
    """Parameter count of a dense decoder-only LM from its ``config.json`` (Qwen2/Qwen3/Llama
    layout: gated MLP, grouped-query attention; :class:`codethinker.training.gpu_memory.ModelShape`);
    None when the config is not of that kind."""
    from codethinker.training.gpu_memory import ModelShape

    try:
        return float(ModelShape.from_config(cfg).parameters)
    except ValueError:
        return None


def gpu_memory_need(
    n_params: float,
    *,
    finetune: str = "lora",
    shards: int = 1,
    rollout_tp: int | None = None,
    vllm_share: float | None = None,
) -> MemoryNeed:
    """Free memory per GPU to train a policy of ``n_params`` parameters (a rough estimate, stated).

    Training: LoRA holds the frozen bf16 weights (2 bytes/parameter), full fine-tuning with Adam
    16 bytes/parameter; sharded over ``shards`` GPUs (FSDP). Rollouts: with ``vllm_share`` (verl)
    vLLM takes that share of each GPU (its weights and KV cache live inside it); with ``rollout_tp``
    a vLLM copy of the bf16 weights split over that many GPUs. Plus 20 % headroom.

    >>> round(gpu_memory_need(7.6e9, shards=8, vllm_share=0.6).per_device(0) / 1e9, 2)
    2.28
    """
    per_param = BF16 if finetune == "lora" else ADAM_FULL
    train = per_param * n_params / max(1, shards)
    what = "LoRA: frozen bf16 weights" if finetune == "lora" else "full fine-tuning: weights, grads, Adam (16 B/param)"
    text = f"{what} {_gib(train)}" + (f" (sharded over {shards} GPUs)" if shards > 1 else "")
    if vllm_share is not None:
        fixed = HEADROOM * train
        text += f", +20 %; vLLM's gpu_memory_utilization {vllm_share:g} of each GPU"
        return MemoryNeed(fixed, float(vllm_share), text)
    rollout = BF16 * n_params / rollout_tp if rollout_tp else 0.0
    if rollout_tp:
        text += f" + vLLM rollout weights {_gib(rollout)}" + (
            f" (tensor parallel {rollout_tp})" if rollout_tp > 1 else ""
        )
    text += ", +20 %"
    return MemoryNeed(HEADROOM * (train + rollout), 0.0, text)


def policy_parameters(ref: str, root: Path, probes: Probes) -> tuple[float | None, str]:
    """The policy's parameter count and where it came from (config.json, the table, its name)."""
    configs = [_local(ref, root) / "config.json"]
    cached = probes.cached(ref, "config.json") if re.fullmatch(r"[\w.-]+/[\w.-]+", ref) else None
    if cached:
        configs.append(Path(cached))
    for cfg in configs:
        if cfg.is_file():
            try:
                n = parameters_from_config(json.loads(cfg.read_text()))
            except (OSError, ValueError):
                n = None
            if n:
                return n, f"from {cfg}"
    if ref in KNOWN_PARAMETERS:
        return KNOWN_PARAMETERS[ref], "from the table of known models"
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)[Bb](?![a-zA-Z])", ref.rsplit("/", 1)[-1].replace("-", " "))
    if m:
        return float(m.group(1)) * 1e9, "guessed from its name"
    return None, f"unknown (no config.json for {ref} here, not in the table)"


def _plan_gpus(params: ParamsFile, root: Path) -> list[PlannedCheck]:
    grpo, sft = trainer_section(params, "grpo"), trainer_section(params, "sft")
    backend = grpo.params.backend if grpo is not None else "local"
    model = policy(params)
    hub_policy = bool(model) and is_hub_id(model, root, _made_by_stages(root))
    if backend != "verl" and not hub_policy:
        reason = f"not needed: grpo.backend is {backend} and the policy {model or '(none)'} is not a hub model"
        return [PlannedCheck("GPUs", frozenset(), None, reason)]
    verl = grpo.params.verl if grpo is not None else None  # backend verl: the section says so
    grpo_ft = grpo.params.finetune if grpo is not None else "full"
    if backend == "verl":
        gpus = verl.gpus_per_node if verl is not None else 1
        stage_set = GRPO_STAGES | ({"sft"} if hub_policy else set())
        why = f"grpo.backend is verl: grpo.verl.gpus_per_node = {gpus} on this node"
    else:
        gpus, stage_set = 1, GRPO_STAGES | {"sft"}
        why = f"the policy {model} is a hub model (trained on one GPU)"
    sft_ft = sft.params.finetune if sft is not None else "lora"

    def probe(p: Probes) -> CheckResult:
        n, source = policy_parameters(model, root, p)
        needs: list[tuple[str, MemoryNeed]] = []
        if n is not None:
            if backend == "verl":
                util = float(verl.gpu_memory_utilization or 0.6) if verl is not None else 0.6
                needs.append(("grpo", gpu_memory_need(n, finetune=grpo_ft, shards=gpus, vllm_share=util)))
            else:
                needs.append(("grpo", gpu_memory_need(n, finetune=grpo_ft, rollout_tp=1)))
            if hub_policy:
                needs.append(("sft", gpu_memory_need(n, finetune=sft_ft)))
        return _check_gpus(p, model, gpus, why, n, source, needs, backend, verl)

    return [PlannedCheck("GPUs", stage_set, probe)]


def _memory_estimate(policy: str, n: float | None, source: str, needs: list[tuple[str, MemoryNeed]]) -> str:
    """The estimate the GPU check states: per stage, the free memory a GPU needs and why."""
    if n is None:
        return f"memory need unknown: the parameter count of {policy} is {source}"
    each = []
    for stage, m in needs:
        share = f" + {m.device_share:g} of the GPU" if m.device_share else ""
        each.append(f"{stage} {_gib(m.fixed_bytes)}{share} ({m.explanation})")
    return f"estimated free memory per GPU for {policy} ({_count(n)} parameters, {source}): " + "; ".join(each)


def _memory_shortfalls(
    found: list[GPUInfo],
    gpus: int,
    n: float | None,
    needs: list[tuple[str, MemoryNeed]],
    backend: str,
    verl: VerlParams | None,
) -> list[str]:
    """What the first ``gpus`` of ``found`` lack: free memory per GPU (two named, the rest counted),
    and with verl, room in vLLM's share for the bf16 weights per GPU."""
    short = []
    for g in found[:gpus]:
        need = max((m.per_device(g.total_bytes) for _, m in needs), default=0.0)
        if g.free_bytes < need:
            short.append(f"GPU {g.index} has {_gib(g.free_bytes)} free of {_gib(g.total_bytes)}, needs {_gib(need)}")
    if len(short) > 2:
        short[2:] = [f"{len(short) - 2} more GPU(s) short of memory"]
    if backend == "verl" and n is not None and verl is not None:
        util = float(verl.gpu_memory_utilization or 0.6)
        tp = int(verl.tensor_parallel or 1)
        weights = BF16 * n / tp
        g = found[0]
        if weights > util * g.total_bytes:
            short.append(
                f"vLLM's share {util:g} x {_gib(g.total_bytes)} cannot hold the {_gib(weights)} of bf16 weights per "
                f"GPU (tensor parallel {tp})"
            )
    return short


def _check_gpus(
    p: Probes,
    policy: str,
    gpus: int,
    why: str,
    n: float | None,
    source: str,
    needs: list[tuple[str, MemoryNeed]],
    backend: str,
    verl: VerlParams | None,
) -> CheckResult:
    estimate = _memory_estimate(policy, n, source, needs)
    try:
        found = p.list_gpus()
    except ProbeError as exc:
        return CheckResult(
            "GPUs",
            "fail",
            f"need {gpus} GPU(s) ({why}); found none: {exc}; {estimate}",
            "run on a machine with CUDA GPUs and a CUDA build of torch (CUDA_VISIBLE_DEVICES must show them)",
        )
    if len(found) < gpus:
        return CheckResult(
            "GPUs",
            "fail",
            f"need {gpus} GPU(s) ({why}); torch sees {len(found)}; {estimate}",
            "run where that many GPUs are visible, or lower grpo.verl.gpus_per_node"
            if backend == "verl"
            else "run on a machine with a GPU",
        )
    short = _memory_shortfalls(found, gpus, n, needs, backend, verl)
    seen = f"{len(found)} visible: " + ", ".join(f"{g.index} {g.name} {_gib(g.free_bytes)} free" for g in found[:4])
    seen += " ..." if len(found) > 4 else ""
    if short:
        return CheckResult(
            "GPUs",
            "fail",
            f"need {gpus} GPU(s) ({why}); " + "; ".join(short) + f"; {estimate}",
            "free the GPUs (other processes hold memory), raise grpo.verl.tensor_parallel, or use bigger GPUs",
        )
    return CheckResult("GPUs", "pass", f"need {gpus} ({why}), {seen}; {estimate}")
