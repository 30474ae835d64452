"""A byte-level BPE tokenizer trained on the project's own training corpus (the micro policy's).

A policy trained from scratch on two CPU cores cannot afford Qwen2's 151,936-token output layer
(it would hold ~99% of a 4-layer model's weights and compute): a vocabulary of about a thousand
tokens learned from the SFT rows covers the ConTra tags, Python and the digits. Digits are split
one per token (as Qwen2 does), so every number is spelled the same way.

``split="line"`` (the default) lets merges cross spaces and stop only at a newline or a digit, so a
frequent code fragment such as ``]        return `` or ``w.count('`` becomes one token: a trace of
the generated programs is about half as many tokens as with GPT-2's word split (``split="word"``),
which halves the steps a tiny model must copy a code line in and doubles the rows per second it
trains on. The prompt's ``Input: `` and the answer's ``assert `` are pieces of their own, so the call
``f(...)`` is the same tokens in both places and copying it needs no more than copying a code line
(a model copies by matching a token it has seen before). Saved as a transformers
fast tokenizer with ChatML's special tokens and template, so transformers, TRL and vLLM load it
with ``AutoTokenizer.from_pretrained`` like any hub tokenizer.

>>> tok = train_bpe(["[TRACE]\\nx = 1\\n[/TRACE]"] * 50, vocab_size=300)
>>> tok.decode(tok("x = 12").input_ids)
'x = 12'
>>> tok.convert_ids_to_tokens(tok("12").input_ids)
['1', '2']
>>> [tok.decode([i]) for i in tok("x = 1").input_ids]
['x = ', '1']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["SPECIAL_TOKENS", "SPLITS", "train_bpe"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
SPLITS = ("line", "word")  # where merges stop: newlines and digits | also spaces and punctuation (GPT-2)
MAX_TOKEN_CHARS = 48  # longest token the line split may learn
CALL_PREFIXES = "Input: |assert "  # what precedes the call in the prompt and in RETURN (line split)


def train_bpe(texts: Iterable[str], vocab_size: int = 1024, split: str = "line") -> Any:
    """A ``PreTrainedTokenizerFast`` (ChatML template, eos ``<|im_end|>``, pad ``<|endoftext|>``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from codethinker.training.bootstrap import CHATML_TEMPLATE

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} is below the 256 bytes + {len(SPECIAL_TOKENS)} special tokens")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    core = Tokenizer(models.BPE())
    digits = pre_tokenizers.Digits(individual_digits=True)
    if split == "line":
        call = pre_tokenizers.Split(Regex(CALL_PREFIXES), behavior="isolated")
        lines = pre_tokenizers.Split(Regex("\n"), behavior="isolated")
        steps = [call, lines, digits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    else:
        steps = [digits, pre_tokenizers.ByteLevel(add_prefix_space=False)]
    core.pre_tokenizer = pre_tokenizers.Sequence(steps)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=MAX_TOKEN_CHARS if split == "line" else None,
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok
