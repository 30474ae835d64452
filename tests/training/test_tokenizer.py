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


@pytest.fixture(scope="module")
def word_tok():
    return train_bpe(CORPUS, vocab_size=400, split="word")


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


def test_an_unknown_split_is_refused():
    with pytest.raises(ValueError, match="split must be one of line, word"):
        train_bpe(CORPUS, vocab_size=400, split="char")


def test_line_split_merges_across_spaces_but_not_newlines_or_digits(tok, word_tok):
    line = "[LINENO 1]        return x + 1"
    pieces = [tok.decode([i]) for i in tok(line).input_ids]
    assert "]        return x + " in pieces  # one token across the spaces
    assert len(tok(CORPUS[0]).input_ids) < 0.7 * len(word_tok(CORPUS[0]).input_ids)
    assert all("\n" not in p or p == "\n" for p in (tok.decode([i]) for i in tok(CORPUS[0]).input_ids))
    assert [tok.decode([i]) for i in tok("f(2024)").input_ids][-5:] == ["2", "0", "2", "4", ")"]


def test_the_call_is_the_same_tokens_in_the_prompt_and_in_return(tok):
    """A model copies by matching tokens: ``Input: f(12)`` and ``assert f(12) == 13`` share ``f(``, 1, 2."""
    prompt, answer = tok("Input: f(12)\n").input_ids, tok("assert f(12) == 13\n").input_ids
    assert prompt[1:4] == answer[1:4]
    assert [tok.decode([i]) for i in prompt[:1] + answer[:1]] == ["Input: ", "assert "]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_round_trips(tok, word_tok, s):
    for t in (tok, word_tok):
        assert t.decode(t(s, add_special_tokens=False).input_ids) == s
