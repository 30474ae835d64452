"""Preflight's GPU check, when the profile trains on GPUs (``grpo.backend: verl``, or a hub policy):
the visible CUDA devices and their free memory against an estimate made from the policy's size
(:func:`gpu_memory_need`, :func:`policy_size`).

The size is accelerate's (what ``accelerate estimate-memory`` measures): the policy is built from its
``config.json`` on the meta device (``accelerate.init_empty_weights`` +
``transformers.AutoModelForCausalLM.from_config``, in bf16, no memory allocated) and
``accelerate.utils.calculate_maximum_sizes`` gives its weights in bytes; its parameters are counted
on the same model. The config comes from a local model folder, the Hugging Face cache, or the hub
(a ``GET`` of its ``config.json`` unless ``HF_HUB_OFFLINE`` is set). Only when no config is reachable
(offline, not cached, a gated repo) does a hub id fall back to :data:`KNOWN_PARAMETERS`, then to the
size in its name. torch, transformers and accelerate are imported only then, inside the GPU check.

What accelerate does not estimate is the project's own: the training state (frozen bf16 weights
under LoRA; bf16 weights and gradients, fp32 master weights and Adam's two moments under full
fine-tuning, sharded by FSDP), vLLM's rollout copy of the weights, vLLM's ``gpu_memory_utilization``
share of each GPU under verl (its weights and KV cache live inside it; the local backend's KV cache
is planned by :mod:`codethinker.training.gpu_memory`) and 20 % headroom."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
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

__all__ = [
    "KNOWN_PARAMETERS",
    "MemoryNeed",
    "ModelSize",
    "PolicySize",
    "gpu_memory_need",
    "model_size_from_config",
    "parameters_from_config",
    "policy_parameters",
    "policy_size",
]

GIB = 1024**3
BF16 = 2  # bytes per parameter
ADAM_FULL = 16  # bf16 weights + bf16 grads + fp32 master weights + Adam m and v, bytes per parameter
HEADROOM = 1.2  # activations, CUDA context, allocator fragmentation

# the offline fallback only: parameter counts of hub policies for when no config.json is reachable
# (offline and not in the Hugging Face cache, or gated); with a config.json, accelerate measures the model
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


@dataclass(frozen=True)
class ModelSize:
    """A model as accelerate measures it on the meta device: its parameters, its weights in bf16
    (bytes, buffers included) and its largest layer that cannot be split (bytes)."""

    parameters: int
    weight_bytes: int
    largest_layer_bytes: int


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' logging at error level while a config is built (its notes are no preflight's)."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def model_size_from_config(cfg: Mapping[str, Any]) -> ModelSize | None:
    """The causal LM that ``cfg`` (a ``config.json`` mapping) describes, built on the meta device
    (``accelerate.init_empty_weights`` + ``AutoModelForCausalLM.from_config``, bf16) and measured by
    ``accelerate.utils.calculate_maximum_sizes``; None when transformers cannot build it (no or an
    unknown ``model_type``, not a causal LM, custom code). ``ImportError`` without torch, transformers
    or accelerate (the ``train`` extra)."""
    import torch
    import transformers
    from accelerate import init_empty_weights
    from accelerate.utils import calculate_maximum_sizes

    fields = dict(cfg)
    model_type = fields.pop("model_type", None)
    if not isinstance(model_type, str):
        return None
    try:
        with _quiet_transformers():
            config = transformers.AutoConfig.for_model(model_type, **fields)
            with init_empty_weights():
                model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
            # init_empty_weights wraps each parameter registered inside it in a new Parameter, so the LM head
            # that transformers 5 ties to the embedding inside it comes out untied: tie it again here
            model.tie_weights()
    except ImportError:
        raise
    except Exception:  # a config transformers refuses, whatever it raises: the caller falls back
        return None
    total, (largest, _) = calculate_maximum_sizes(model)
    return ModelSize(sum(p.numel() for p in model.parameters()), int(total), int(largest))


def parameters_from_config(cfg: Mapping[str, Any]) -> float | None:
    """Parameter count of the causal LM that ``config.json`` describes, counted on the meta device
    (:func:`model_size_from_config`); None when transformers cannot build it or is not installed."""
    try:
        size = model_size_from_config(cfg)
    except ImportError:
        return None
    return float(size.parameters) if size else None


def gpu_memory_need(
    n_params: float,
    *,
    finetune: str = "lora",
    shards: int = 1,
    rollout_tp: int | None = None,
    vllm_share: float | None = None,
    weight_bytes: float | None = None,
) -> MemoryNeed:
    """Free memory per GPU to train a policy of ``n_params`` parameters (a rough estimate, stated).

    ``weight_bytes``: its bf16 weights (accelerate's measure, :func:`model_size_from_config`; by
    default 2 bytes/parameter). Training: LoRA holds the frozen bf16 weights, full fine-tuning with
    Adam 16 bytes/parameter; sharded over ``shards`` GPUs (FSDP). Rollouts: with ``vllm_share`` (verl)
    vLLM takes that share of each GPU (its weights and KV cache live inside it); with ``rollout_tp``
    a vLLM copy of the bf16 weights split over that many GPUs. Plus 20 % headroom.

    >>> round(gpu_memory_need(7.6e9, shards=8, vllm_share=0.6).per_device(0) / 1e9, 2)
    2.28
    """
    weights = BF16 * n_params if weight_bytes is None else weight_bytes
    train = (weights if finetune == "lora" else ADAM_FULL * n_params) / max(1, shards)
    what = "LoRA: frozen bf16 weights" if finetune == "lora" else "full fine-tuning: weights, grads, Adam (16 B/param)"
    text = f"{what} {_gib(train)}" + (f" (sharded over {shards} GPUs)" if shards > 1 else "")
    if vllm_share is not None:
        fixed = HEADROOM * train
        text += f", +20 %; vLLM's gpu_memory_utilization {vllm_share:g} of each GPU"
        return MemoryNeed(fixed, float(vllm_share), text)
    rollout = weights / rollout_tp if rollout_tp else 0.0
    if rollout_tp:
        text += f" + vLLM rollout weights {_gib(rollout)}" + (
            f" (tensor parallel {rollout_tp})" if rollout_tp > 1 else ""
        )
    text += ", +20 %"
    return MemoryNeed(HEADROOM * (train + rollout), 0.0, text)


@dataclass(frozen=True)
class PolicySize:
    """The policy's parameter count and bf16 weights (None when unknown) and where they came from."""

    parameters: float | None
    weight_bytes: float | None
    source: str  # "from <config.json>, accelerate on the meta device", the table, the name, or why unknown


def _hub_config(ref: str, p: Probes) -> tuple[Any, str]:
    """``ref``'s ``config.json`` from the hub (None offline, unreachable or refused) and its URL."""
    url = f"{p.hub_endpoint()}/{ref}/resolve/main/config.json"
    if p.offline():
        return None, url
    headers = {"Authorization": f"Bearer {p.env['HF_TOKEN']}"} if p.env.get("HF_TOKEN") else {}
    try:
        status, body = p.http("GET", url, p.timeout_s, headers)
        return (json.loads(body) if status == 200 else None), url
    except (OSError, ValueError):
        return None, url


def _configs(ref: str, root: Path, p: Probes) -> list[tuple[Any, str]]:
    """``(config, where)`` for the ``config.json`` files reachable for ``ref``: its local folder, the
    Hugging Face cache, else (a hub id, online) the hub's."""
    hub_id = re.fullmatch(r"[\w.-]+/[\w.-]+", ref) is not None
    found = []
    for path in (_local(ref, root) / "config.json", p.cached(ref, "config.json") if hub_id else None):
        if path and Path(path).is_file():
            try:
                found.append((json.loads(Path(path).read_text()), str(path)))
            except (OSError, ValueError):
                continue
    if hub_id and not found:
        cfg, url = _hub_config(ref, p)
        if cfg is not None:
            found.append((cfg, url))
    return found


def policy_size(ref: str, root: Path, probes: Probes) -> PolicySize:
    """The policy's size, measured by accelerate (:func:`model_size_from_config`) from the first
    ``config.json`` reachable (its local folder, the Hugging Face cache, the hub); only without one
    (offline, not cached, gated) or without the ``train`` extra, a hub id's entry in
    :data:`KNOWN_PARAMETERS`, then the size in its name (bf16 weights at 2 bytes/parameter)."""
    configs = _configs(ref, root, probes)
    why = ""
    for cfg, where in configs:
        try:
            size = model_size_from_config(cfg) if isinstance(cfg, dict) else None
        except ImportError as exc:
            why = f" ({where} not measured: {exc.name or exc} is not installed)"
            break
        if size:
            n, w = float(size.parameters), float(size.weight_bytes)
            return PolicySize(n, w, f"from {where}, accelerate on the meta device")
        why = f" (transformers cannot build a causal LM from {where})"
    if ref in KNOWN_PARAMETERS:
        n = KNOWN_PARAMETERS[ref]
        return PolicySize(n, BF16 * n, "from the table of known models" + why)
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)[Bb](?![a-zA-Z])", ref.rsplit("/", 1)[-1].replace("-", " "))
    if m:
        n = float(m.group(1)) * 1e9
        return PolicySize(n, BF16 * n, "guessed from its name" + why)
    if why:
        return PolicySize(None, None, "unknown" + why)
    return PolicySize(None, None, f"unknown (no config.json for {ref} here, not in the table)")


def policy_parameters(ref: str, root: Path, probes: Probes) -> tuple[float | None, str]:
    """The policy's parameter count and where it came from (:func:`policy_size`)."""
    size = policy_size(ref, root, probes)
    return size.parameters, size.source


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
        size = policy_size(model, root, p)
        n, w = size.parameters, size.weight_bytes
        needs: list[tuple[str, MemoryNeed]] = []
        if n is not None:
            if backend == "verl":
                util = float(verl.gpu_memory_utilization or 0.6) if verl is not None else 0.6
                need = gpu_memory_need(n, finetune=grpo_ft, shards=gpus, vllm_share=util, weight_bytes=w)
                needs.append(("grpo", need))
            else:
                needs.append(("grpo", gpu_memory_need(n, finetune=grpo_ft, rollout_tp=1, weight_bytes=w)))
            if hub_policy:
                needs.append(("sft", gpu_memory_need(n, finetune=sft_ft, weight_bytes=w)))
        return _check_gpus(p, model, gpus, why, size, needs, backend, verl)

    return [PlannedCheck("GPUs", stage_set, probe)]


def _memory_estimate(policy: str, size: PolicySize, needs: list[tuple[str, MemoryNeed]]) -> str:
    """The estimate the GPU check states: per stage, the free memory a GPU needs and why."""
    n, source = size.parameters, size.source
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
    weight_bytes: float | None,
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
    if backend == "verl" and weight_bytes is not None and verl is not None:
        util = float(verl.gpu_memory_utilization or 0.6)
        tp = int(verl.tensor_parallel or 1)
        weights = weight_bytes / tp
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
    size: PolicySize,
    needs: list[tuple[str, MemoryNeed]],
    backend: str,
    verl: VerlParams | None,
) -> CheckResult:
    estimate = _memory_estimate(policy, size, needs)
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
    short = _memory_shortfalls(found, gpus, size.weight_bytes, needs, backend, verl)
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
