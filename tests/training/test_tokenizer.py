"""The micro policy's tokenizer: trained on the corpus, ChatML, digits one per token, and loaded back
by transformers the usual way (what TRL and vLLM do)."""

from __future__ import annotations

import unicodedata

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
def line_tok():
    return train_bpe(CORPUS, vocab_size=400, split="line")


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


def test_line_split_merges_across_spaces_but_not_newlines_or_digits(line_tok, tok):
    line = "[LINENO 1]        return x + 1"
    pieces = [line_tok.decode([i]) for i in line_tok(line).input_ids]
    assert "]        return x + " in pieces  # one token across the spaces
    assert len(line_tok(CORPUS[0]).input_ids) < 0.8 * len(tok(CORPUS[0]).input_ids)
    assert all("\n" not in p or p == "\n" for p in (line_tok.decode([i]) for i in line_tok(CORPUS[0]).input_ids))
    assert [line_tok.decode([i]) for i in line_tok("f(2024)").input_ids][-5:] == ["2", "0", "2", "4", ")"]


def test_the_call_is_the_same_tokens_in_the_prompt_and_in_return(line_tok):
    """A model copies by matching tokens: ``Input: f(12)`` and ``assert f(12) == 13`` share ``f(``, 1, 2."""
    prompt, answer = line_tok("Input: f(12)\n").input_ids, line_tok("assert f(12) == 13\n").input_ids
    assert prompt[1:4] == answer[1:4]
    assert [line_tok.decode([i]) for i in prompt[:1] + answer[:1]] == ["Input: ", "assert "]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_round_trips(tok, line_tok, s):
    """The line split is lossless; the word split normalizes to NFC first, as Qwen2's tokenizer does, so
    it round-trips NFC text (a CJK compatibility ideograph such as U+F900 comes back as U+8C48)."""
    assert line_tok.decode(line_tok(s, add_special_tokens=False).input_ids) == s
    assert tok.decode(tok(s, add_special_tokens=False).input_ids) == unicodedata.normalize("NFC", s)


def test_the_word_split_normalizes_like_qwen2():
    """Regression (CI of stop 19): hypothesis found U+F900, which NFC maps to U+8C48."""
    word = train_bpe(CORPUS, vocab_size=400)
    assert word.decode(word("\uf900", add_special_tokens=False).input_ids) == "\u8c48"


@pytest.mark.slow
def test_a_policy_folder_loads_the_word_split_as_trained_and_refuses_the_line_split(tmp_path):
    """transformers 5 loads a tokenizer saved beside a qwen2 config as ``Qwen2Tokenizer`` with Qwen2's
    pre-tokenizer: the line split came back 2.5x longer in the stop-18 run (its merges unused), so
    bootstrap now checks the reload. Regression test."""
    from transformers import AutoTokenizer

    from codethinker.training.bootstrap import build_tiny_model

    word = train_bpe(CORPUS, vocab_size=400)
    build_tiny_model(tmp_path / "word", word, seed=0)
    back = AutoTokenizer.from_pretrained(tmp_path / "word")
    assert type(back).__name__ == "Qwen2Tokenizer" and back(CORPUS[0]).input_ids == word(CORPUS[0]).input_ids
    with pytest.raises(ValueError, match="loads as Qwen2Tokenizer and splits text differently"):
        build_tiny_model(tmp_path / "line", train_bpe(CORPUS, vocab_size=400, split="line"), seed=0)
