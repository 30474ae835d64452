"""Stage bootstrap: the tiny random Qwen2 policy the default profile trains from scratch.

    python -m stages.bootstrap            # -> models/base (weights, tokenizer, ChatML template)

Reads ``bootstrap`` (shape, tokenizer) and ``base``. ``tokenizer: train`` learns a byte-level BPE
of ``vocab_size`` tokens (pre-tokenized as ``bpe_split`` says) on the SFT rows
(``data/contra_sft/sft.jsonl``, prompts and traces: the training split only, never a held-out or
benchmark program); ``tokenizer: mirror`` copies the real
Qwen2 tokenizer from ``base.tokenizer_mirror``. ``model.base`` (used by sft/grpo/train_eval)
defaults to this stage's output; set it to a hub id such as ``Qwen/Qwen2.5-Coder-7B-Instruct``
(the ``full`` profile) to train a real model instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from codethinker.data.io import iter_jsonl
from codethinker.ops.stage import stage_main, stage_run
from codethinker.params import load_section
from codethinker.training.bootstrap import TinyShape, build_tiny_model
from codethinker.training.tokenizer import train_bpe

CORPUS = Path("data/contra_sft/sft.jsonl")


def corpus_texts(path: Path):
    """Each SFT row as the chat template lays it out (roles, prompt, answer)."""
    for row in iter_jsonl(path, {"messages": list}):
        yield "".join(f"{m['role']}\n{m['content']}\n" for m in row["messages"])


@stage_main
def main() -> None:
    p = load_section("bootstrap")
    base = p["base"]
    kind = str(p.get("tokenizer", "mirror"))
    if kind == "train":
        texts = list(corpus_texts(CORPUS))
        if not texts:
            raise SystemExit(f"bootstrap: {CORPUS} has no rows to train the tokenizer on (run contra_sft first)")
        tokenizer = train_bpe(texts, int(p.get("vocab_size", 1024)), str(p.get("bpe_split", "word")))
    elif kind == "mirror":
        tokenizer = Path(os.environ.get("CODETHINKER_TOKENIZER") or base.get("tokenizer_mirror", ""))
        if not (tokenizer / "vocab.json").is_file() and not (tokenizer / "tokenizer.json").is_file():
            raise SystemExit(f"bootstrap: no tokenizer files in {tokenizer} (set base.tokenizer_mirror)")
    else:
        raise SystemExit(f"bootstrap.tokenizer must be 'train' or 'mirror', got {kind!r}")
    shape = p.get("shape") or {}
    unknown = set(shape) - set(TinyShape.__dataclass_fields__)
    if unknown:
        raise SystemExit(f"bootstrap.shape: unknown keys {sorted(unknown)}")
    out = Path(p.get("out", "models/base"))
    with stage_run("bootstrap", p) as run:
        build_tiny_model(out, tokenizer, seed=int(base.get("seed", 0)), **shape)
        meta = json.loads((out / "bootstrap.json").read_text())
        run.log_params({"vocab_size": meta["vocab_size"], "parameters": meta["parameters"]})
    print(f"bootstrap: wrote {out} ({meta['parameters']:,} parameters, {meta['tokenizer']})")


if __name__ == "__main__":
    main()
