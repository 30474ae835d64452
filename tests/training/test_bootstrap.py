"""The tiny random Qwen2 policy: shape, tokenizer, chat template, determinism."""

from __future__ import annotations

import json

import pytest

from codethinker.training.bootstrap import TinyShape, build_tiny_model


def test_tiny_model_loads_with_tokenizer_and_chatml(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    cfg = model.config
    assert cfg.model_type == "qwen2"
    assert cfg.hidden_size // cfg.num_attention_heads >= 64
    assert cfg.vocab_size == len(tok)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids = tok(text, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok))
    assert json.loads((tiny_model / "bootstrap.json").read_text())["seed"] == 0


def test_same_seed_same_weights(tmp_path, tokenizer_dir):
    from safetensors.torch import load_file

    a = build_tiny_model(tmp_path / "a", tokenizer_dir, seed=3, num_hidden_layers=1)
    b = build_tiny_model(tmp_path / "b", tokenizer_dir, seed=3, num_hidden_layers=1)
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all((wa[k] == wb[k]).all() for k in wa)


def test_small_heads_are_rejected():
    with pytest.raises(ValueError, match="head dim"):
        TinyShape(hidden_size=64, num_attention_heads=4).check()
