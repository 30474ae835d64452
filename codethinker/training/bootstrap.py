"""A tiny random Qwen2 causal LM: the default profile's policy, trained from scratch by SFT.

It exists so the whole pipeline (SFT, GRPO, vLLM rollouts, evaluation) runs and learns on two CPU
cores without a model hub. Its tokenizer is either one trained on the project's SFT corpus
(:func:`codethinker.training.tokenizer.train_bpe`) or the real Qwen2 tokenizer from a folder.
Shape constraints come from vLLM's CPU build: head dimension >= 64
(``hidden_size / num_attention_heads``). The chat template is Qwen2's plain ChatML.

>>> build_tiny_model(Path("models/base"), Path("../shared/models/qwen2-tokenizer"))  # doctest: +SKIP
PosixPath('models/base')
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CHATML_TEMPLATE", "TinyShape", "build_tiny_model", "check_reload"]

# Qwen2's ChatML, without Qwen2.5-Instruct's default system prompt.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass
class TinyShape:
    hidden_size: int = field(default=128, metadata={"help": "model width; hidden/heads must be >= 64"})
    num_attention_heads: int = field(default=2, metadata={"help": "query heads"})
    num_key_value_heads: int = field(default=2, metadata={"help": "key/value heads (GQA when fewer)"})
    num_hidden_layers: int = field(default=4, metadata={"help": "decoder layers"})
    intermediate_size: int = field(default=384, metadata={"help": "MLP width"})
    max_position_embeddings: int = field(default=4096, metadata={"help": "context length"})
    vocab_size: int | None = field(default=None, metadata={"help": "None: the tokenizer's length"})
    tie_word_embeddings: bool = field(default=True, metadata={"help": "share input/output embeddings"})

    def check(self) -> None:
        head_dim = self.hidden_size // self.num_attention_heads
        if head_dim < 64 or self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"head dim {self.hidden_size}/{self.num_attention_heads} must be an integer >= 64 "
                "(vLLM's CPU attention kernels reject smaller heads)"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")


def load_tokenizer(tokenizer_dir: Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    if not getattr(tok, "chat_template", None):
        tok.chat_template = CHATML_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = "<|endoftext|>"
    return tok


PROBE = (
    "[CODE]\n[LINENO 0]    def f(nums):\n[LINENO 1]        total = sum(nums) + 12\n[/CODE]\n\n"
    "Input: f([3, 40])\n[TRACE]\n[LOCALS]\n{'nums': [3, 40], 'total': 55}\n[/LOCALS]\n"
    "[RETURN]\nassert f([3, 40]) == 55\n[/RETURN]\n[/TRACE]"
)


def check_reload(tok: Any, folder: Path) -> None:
    """Raise unless ``AutoTokenizer`` loads ``folder``'s tokenizer as it was trained: transformers 5
    loads a tokenizer beside a ``qwen2`` config as ``Qwen2Tokenizer`` with Qwen2's own pre-tokenizer,
    and TRL and vLLM load it that way (a line-split BPE came back 2.5x longer, its merges unused)."""
    from transformers import AutoTokenizer

    back = AutoTokenizer.from_pretrained(str(folder))
    got, want = back(PROBE).input_ids, tok(PROBE).input_ids
    if got != want:
        raise ValueError(
            f"{folder}: the saved tokenizer loads as {type(back).__name__} and splits text differently "
            f"({len(got)} tokens instead of {len(want)} for a ConTra "
            "snippet); train it with bootstrap.bpe_split: word"
        )


def build_tiny_model(out_dir: Path, tokenizer: Path | Any, seed: int = 0, **shape: Any) -> Path:
    """Write a random-weight Qwen2ForCausalLM + tokenizer + ChatML template into ``out_dir``.

    ``tokenizer``: a folder with tokenizer files, or a tokenizer object. ``shape`` overrides
    :class:`TinyShape` fields. Deterministic for a given seed. Returns ``out_dir``.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = TinyShape(**shape)
    spec.check()
    from_dir = isinstance(tokenizer, str | Path)
    tok = load_tokenizer(Path(tokenizer)) if from_dir else tokenizer
    tok.chat_template = CHATML_TEMPLATE
    tok.eos_token = "<|im_end|>"  # a chat model ends its turn here (as Qwen2.5-Instruct's tokenizer)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    vocab = spec.vocab_size or len(tok)
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=eot,
        eos_token_id=im_end,
        pad_token_id=eot,
        use_sliding_window=False,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=eot, eos_token_id=[im_end, eot], pad_token_id=eot, do_sample=True
    )
    model.save_pretrained(str(out_dir), safe_serialization=True)
    tok.save_pretrained(str(out_dir))
    if not from_dir:
        check_reload(tok, out_dir)
    meta: dict[str, Any] = {
        "seed": seed,
        "shape": asdict(spec),
        "vocab_size": vocab,
        "tokenizer": str(tokenizer) if from_dir else f"trained byte-level BPE, {len(tok)} tokens",
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    (out_dir / "bootstrap.json").write_text(json.dumps(meta, indent=2) + "\n")
    return out_dir
