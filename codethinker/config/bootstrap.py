"""params.yaml's ``bootstrap`` section (the tiny policy trained from scratch) as a frozen dataclass
for :func:`codethinker.config.load_config` (docs/training.md); where it writes is the stage's ``--out``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from codethinker.config.loader import Section, bounded
from codethinker.training.bootstrap import TinyShape

__all__ = ["BootstrapConfig"]


@dataclass(frozen=True)
class BootstrapConfig(Section):
    SECTION: ClassVar[str] = "bootstrap"
    tokenizer: str = field(
        default="mirror", metadata={"help": "train (BPE on the SFT rows) | mirror (base.tokenizer_mirror)"}
    )
    vocab_size: int = field(default=1024, metadata=bounded("tokenizer: train: tokens of the BPE", ge=1))
    bpe_split: str = field(default="word", metadata={"help": "word (Qwen2's pre-split) | line (refused: see docs)"})
    shape: TinyShape = field(default_factory=TinyShape, metadata={"help": "the model's shape"})
