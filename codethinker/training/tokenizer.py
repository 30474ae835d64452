"""A byte-level BPE tokenizer trained on the project's own training corpus (the micro policy's).

A policy trained from scratch on two CPU cores cannot afford Qwen2's 151,936-token output layer
(it would hold ~99% of a 4-layer model's weights and compute): a vocabulary of about a thousand
tokens learned from the SFT rows covers the ConTra tags, Python and the digits. Digits are split
one per token (as Qwen2 does), so every number is spelled the same way. Saved as a transformers
fast tokenizer with ChatML's special tokens and template, so transformers, TRL and vLLM load it
with ``AutoTokenizer.from_pretrained`` like any hub tokenizer.

>>> tok = train_bpe(["[TRACE]\\nx = 1\\n[/TRACE]"] * 50, vocab_size=300)
>>> tok.decode(tok("x = 12").input_ids)
'x = 12'
>>> tok.convert_ids_to_tokens(tok("12").input_ids)
['1', '2']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["SPECIAL_TOKENS", "train_bpe"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def train_bpe(texts: Iterable[str], vocab_size: int = 1024) -> Any:
    """A ``PreTrainedTokenizerFast`` (ChatML template, eos ``<|im_end|>``, pad ``<|endoftext|>``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from codethinker.training.bootstrap import CHATML_TEMPLATE

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} is below the 256 bytes + {len(SPECIAL_TOKENS)} special tokens")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
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
