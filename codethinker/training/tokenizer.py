"""A byte-level BPE tokenizer trained on the project's own training corpus (the micro policy's).

A policy trained from scratch on two CPU cores cannot afford Qwen2's 151,936-token output layer
(it would hold ~99% of a 4-layer model's weights and compute): a vocabulary of about a thousand
tokens learned from the SFT rows covers the ConTra tags, Python and the digits. Digits are split
one per token (as Qwen2 does), so every number is spelled the same way.

``split="word"`` (the default) pre-tokenizes as Qwen2 does (words, single digits): transformers 5
loads any tokenizer saved beside a ``qwen2`` model config as ``Qwen2Tokenizer``, which rebuilds
Qwen2's pre-tokenizer whatever the saved ``tokenizer.json`` says, so only merges learned on the same
pieces are used as trained (:func:`~codethinker.training.bootstrap.build_tiny_model` checks this).
``split="line"`` lets merges cross spaces and stop only at a newline or a digit (``]        return ``
becomes one token; a generated program's trace is about 160 tokens instead of 304), and the prompt's
``Input: `` and the answer's ``assert `` are pieces of their own, so the call ``f(...)`` is the same
tokens in both places. It halves the sequence a tiny model trains on, but it survives saving only
for a model type whose tokenizer class transformers does not force (not ``qwen2``). Saved as a transformers
fast tokenizer with ChatML's special tokens and template, so transformers, TRL and vLLM load it
with ``AutoTokenizer.from_pretrained`` like any hub tokenizer.

>>> tok = train_bpe(["[TRACE]\\nx = 1\\n[/TRACE]"] * 50, vocab_size=300)
>>> tok.decode(tok("x = 12").input_ids)
'x = 12'
>>> tok.convert_ids_to_tokens(tok("12").input_ids)
['1', '2']
>>> line = train_bpe(["[TRACE]\\nx = 1\\n[/TRACE]"] * 50, vocab_size=300, split="line")
>>> [line.decode([i]) for i in line("x = 1").input_ids]
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


def train_bpe(texts: Iterable[str], vocab_size: int = 1024, split: str = "word") -> Any:
    """A ``PreTrainedTokenizerFast`` (ChatML template, eos ``<|im_end|>``, pad ``<|endoftext|>``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
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
        steps = [call, lines, digits]
    else:  # exactly what Qwen2Tokenizer rebuilds on loading (its regex splits digits one by one)
        from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

        core.normalizer = normalizers.NFC()
        steps = [pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated")]
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [*steps, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
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
