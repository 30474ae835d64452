"""The micro policy's tokenizer: trained on the corpus, ChatML, digits one per token, and loaded back
by transformers the usual way (what TRL and vLLM do)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codethinker.training.tokenizer import SPECIAL_TOKENS, train_bpe

CORPUS = [
    "user\n[CODE]\n[LINENO 0]    def f(x):\n[LINENO 1]        return x + 1\n[/CODE]\n\nInput: f(12)\n"
    "assistant\n[TRACE]\n[LOCALS]\n{'x': 12}\n[/LOCALS]\n[RETURN]\nassert f(12) == 13\n[/RETURN]\n[/TRACE]\n"
] * 40


@pytest.fixture(scope="module")
def tok():
    return train_bpe(CORPUS, vocab_size=400)


def test_specials_template_and_digits(tok):
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert all(tok.convert_tokens_to_ids(t) < 3 for t in SPECIAL_TOKENS)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.convert_ids_to_tokens(tok("f(2024)").input_ids)[-5:] == ["2", "0", "2", "4", ")"]
    assert len(tok("[LINENO 0]    def f(x):").input_ids) < len("[LINENO 0]    def f(x):") / 2  # merges learned


def test_saved_and_loaded_by_auto_tokenizer(tok, tmp_path):
    from transformers import AutoTokenizer

    tok.save_pretrained(tmp_path)
    back = AutoTokenizer.from_pretrained(tmp_path)
    s = CORPUS[0]
    assert back(s).input_ids == tok(s).input_ids and back.decode(back(s).input_ids) == s
    assert back.chat_template == tok.chat_template and back.eos_token == "<|im_end|>"


def test_vocab_too_small_is_refused():
    with pytest.raises(ValueError, match="below the 256 bytes"):
        train_bpe(CORPUS, vocab_size=100)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_round_trips(tok, s):
    assert tok.decode(tok(s, add_special_tokens=False).input_ids) == s
