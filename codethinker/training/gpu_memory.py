"""GPU memory of the local GRPO backend: the policy that trains and the vLLM that samples share one GPU.

Everything is in bytes, from the policy's ``config.json`` and the run's params; the GPU's total
memory is the only thing measured. An estimate, term by term (bf16 weights and activations):

- policy weights: 2 B per parameter (frozen under LoRA);
- LoRA states: adapter parameters (``r`` x (in + out) per targeted linear layer) x 16 B (fp32 weight,
  gradient, Adam m and v);
- activations of one micro-batch of ``micro_batch`` sequences of ``max_model_len`` tokens: with
  gradient checkpointing each layer's input (``h`` values per token) is kept and one layer at a
  time is recomputed (``4h + 3i`` values per token); without it every layer's ``10h + 4i``; plus the
  completion's logits, their temperature-scaled copy and their gradient (3 x ``vocab`` per
  completion token);
- vLLM: its copy of the bf16 weights, :data:`VLLM_WORKSPACE` for its profile run and CUDA graphs,
  and the KV cache (``2 x layers x kv_heads x head_dim`` bf16 values per token);
- :data:`MARGIN` for the CUDA context and allocator fragmentation.

Without sleep mode vLLM's weights and KV cache stay on the GPU while the policy trains, so all of
it must fit at once. With ``grpo.vllm_sleep`` (vLLM's sleep mode, level 1: its weights go to CPU
memory and its KV cache is freed after each rollout, and come back before the next), the rollout
and the update take turns: only the policy's weights and LoRA states are on the GPU during both.
The KV cache gets what is left, up to what ``rollout_seqs`` sequences of ``max_model_len`` tokens
need (+20%); fewer concurrent sequences only make the rollout slower, so the plan fails only when
one sequence does not fit or the update alone does not fit.

>>> shape = ModelShape.from_config(QWEN25_CODER_7B)
>>> plan = plan_local_gpu(shape, total_bytes=80 * GIB, max_model_len=6144, max_completion_tokens=4096,
...                       rollout_seqs=256, micro_batch=2, lora_r=64, sleep=True)
>>> plan.fits, round(plan.kv_bytes / GIB, 1), plan.concurrent_seqs
(True, 43.2, 131)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codethinker.errors import CodethinkerError

__all__ = ["GIB", "GPUMemoryError", "GPUPlan", "ModelShape", "plan_local_gpu"]

GIB = 1024**3
BF16 = 2
LORA_STATE = 16  # fp32 weight + gradient + Adam m and v, bytes per adapter parameter
KV_MARGIN = 1.2  # the KV cache asked for: what the sequences need, +20%
VLLM_WORKSPACE = 3 * GIB  # vLLM's profile-run activations and CUDA graphs (a stated allowance)
MARGIN = 3 * GIB  # CUDA context, allocator fragmentation (a stated allowance)
QWEN25_CODER_7B = {  # config.json of Qwen/Qwen2.5-Coder-7B-Instruct (the paper's policy)
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
}
_IN_OUT = {  # (in, out) of each Qwen2 linear layer, in units of (hidden, intermediate, q width, kv width)
    "q_proj": ("h", "q"),
    "k_proj": ("h", "kv"),
    "v_proj": ("h", "kv"),
    "o_proj": ("q", "h"),
    "gate_proj": ("h", "i"),
    "up_proj": ("h", "i"),
    "down_proj": ("i", "h"),
}


class GPUMemoryError(CodethinkerError, ValueError):
    """The local backend's policy and vLLM do not fit the GPU; the message has the breakdown."""


@dataclass(frozen=True)
class ModelShape:
    """The dimensions of a dense decoder-only LM (Qwen2/Qwen3/Llama layout) that memory depends on."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = False
    bias: bool = False

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ModelShape:
        """From a ``config.json`` mapping; ``ValueError`` when a field is missing or it is a mixture of experts."""
        if cfg.get("num_experts") or cfg.get("num_local_experts"):
            raise ValueError("a mixture-of-experts config: not this estimate's layout")
        try:
            h, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
            return cls(
                hidden=h,
                intermediate=int(cfg["intermediate_size"]),
                layers=int(cfg["num_hidden_layers"]),
                heads=heads,
                kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(cfg.get("head_dim") or h // heads),
                vocab=int(cfg["vocab_size"]),
                tied=bool(cfg.get("tie_word_embeddings", False)),
                bias=bool(cfg.get("attention_bias", cfg.get("model_type") == "qwen2")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"config.json lacks a dense decoder's dimensions ({exc})") from None

    def _width(self, unit: str) -> int:
        return {"h": self.hidden, "i": self.intermediate, "q": self.heads * self.head_dim}.get(
            unit, self.kv_heads * self.head_dim
        )

    @property
    def parameters(self) -> int:
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attn = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if self.bias else 0)
        layer = attn + 3 * h * self.intermediate + 2 * h
        return self.layers * layer + self.vocab * h * (1 if self.tied else 2) + h

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * BF16

    def lora_parameters(self, r: int, targets: Sequence[str]) -> int:
        """Adapter parameters of rank ``r`` on the named linear layers of every block."""
        unknown = sorted(set(targets) - set(_IN_OUT))
        if unknown:
            raise ValueError(f"LoRA targets {unknown}: not a Qwen2 block's linear layers ({', '.join(_IN_OUT)})")
        per_layer = sum(r * (self._width(_IN_OUT[t][0]) + self._width(_IN_OUT[t][1])) for t in targets)
        return self.layers * per_layer


@dataclass(frozen=True)
class GPUPlan:
    """The estimate for one GPU (bytes) and the KV cache it leaves vLLM."""

    total: int
    policy_weights: int
    lora_states: int
    activations: int
    vllm_weights: int
    kv_need: int  # rollout_seqs sequences of max_model_len tokens, +20%
    kv_bytes: int  # what vLLM is given (0 when nothing fits)
    seq_kv: int  # one sequence of max_model_len tokens
    sleep: bool
    problem: str = ""

    @property
    def fits(self) -> bool:
        return not self.problem

    @property
    def concurrent_seqs(self) -> int:
        """Sequences of ``max_model_len`` tokens the KV cache holds at once."""
        return self.kv_bytes // self.seq_kv if self.seq_kv else 0

    @property
    def rollout_peak(self) -> int:
        return self.policy_weights + self.lora_states + self.vllm_weights + VLLM_WORKSPACE + self.kv_bytes + MARGIN

    @property
    def update_peak(self) -> int:
        vllm = 0 if self.sleep else self.vllm_weights + VLLM_WORKSPACE + self.kv_bytes
        return self.policy_weights + self.lora_states + self.activations + vllm + MARGIN

    def lines(self) -> list[str]:
        """The breakdown, one ``name: GiB`` per line."""
        g = lambda n: f"{n / GIB:.1f} GiB"  # noqa: E731
        rows = [
            f"GPU total: {g(self.total)}",
            f"policy weights (bf16): {g(self.policy_weights)}",
            f"LoRA weights, grads, Adam (fp32): {g(self.lora_states)}",
            f"activations of one micro-batch: {g(self.activations)}",
            f"vLLM weights (bf16): {g(self.vllm_weights)}; workspace {g(VLLM_WORKSPACE)}; margin {g(MARGIN)}",
            f"KV cache: {g(self.kv_bytes)} of {g(self.kv_need)} wanted ({self.concurrent_seqs} sequences at once)",
            f"peak in rollout {g(self.rollout_peak)}, in update {g(self.update_peak)}"
            + (" (vLLM asleep)" if self.sleep else " (vLLM resident)"),
        ]
        return rows + ([f"does not fit: {self.problem}"] if self.problem else [])


def activation_bytes(
    shape: ModelShape, micro_batch: int, max_model_len: int, max_completion_tokens: int, checkpointing: bool = True
) -> int:
    """Peak activation memory of one forward/backward of ``micro_batch`` sequences (bf16, an estimate)."""
    tokens = micro_batch * max_model_len
    h, i = shape.hidden, shape.intermediate
    if checkpointing:
        body = tokens * h * shape.layers + tokens * (4 * h + 3 * i)
    else:
        body = tokens * (10 * h + 4 * i) * shape.layers
    logits = 3 * micro_batch * max_completion_tokens * shape.vocab
    return BF16 * (body + logits)


def plan_local_gpu(
    shape: ModelShape,
    *,
    total_bytes: int,
    max_model_len: int,
    max_completion_tokens: int,
    rollout_seqs: int,
    micro_batch: int,
    lora_r: int | None,
    targets: Sequence[str] = tuple(_IN_OUT),
    checkpointing: bool = True,
    sleep: bool = False,
) -> GPUPlan:
    """Split one GPU between the training policy and vLLM (see the module's docstring).

    ``lora_r`` None: full fine-tuning (every parameter's fp32 weight, gradient and Adam states).
    """
    weights = BF16 * shape.parameters
    trainable = shape.lora_parameters(lora_r, targets) if lora_r else shape.parameters
    states = LORA_STATE * trainable
    acts = activation_bytes(shape, micro_batch, max_model_len, max_completion_tokens, checkpointing)
    seq_kv = max_model_len * shape.kv_bytes_per_token
    need = int(KV_MARGIN * rollout_seqs * seq_kv)
    resident = weights + states + weights + VLLM_WORKSPACE + MARGIN  # both copies of the weights
    room = total_bytes - resident - (0 if sleep else acts)
    kv = max(0, min(need, room))
    problem = ""
    if kv < seq_kv:
        problem = (
            f"{room / GIB:.1f} GiB left for vLLM's KV cache, one sequence of {max_model_len} tokens needs "
            f"{seq_kv / GIB:.2f} GiB"
        )
    elif sleep and weights + states + acts + MARGIN > total_bytes:
        problem = "the update alone (policy, LoRA states, activations) exceeds the GPU"
    return GPUPlan(total_bytes, weights, states, acts, weights, need, kv if not problem else 0, seq_kv, sleep, problem)
