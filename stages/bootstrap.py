"""Stage bootstrap: the tiny random Qwen2 policy the default profile trains from scratch.

Run: ``python -m stages.bootstrap --corpus data/contra_sft/sft.jsonl --out models/base`` (its cmd in dvc.yaml:
``dvc repro bootstrap``): weights, tokenizer and ChatML template in ``--out``.

Reads ``bootstrap`` (shape, tokenizer) and ``base``. ``tokenizer: train`` learns a byte-level BPE
of ``vocab_size`` tokens (pre-tokenized as ``bpe_split`` says) on the SFT rows
(``--corpus``, prompts and traces: the training split only, never a held-out or
benchmark program); ``tokenizer: mirror`` copies the real
Qwen2 tokenizer from ``base.tokenizer_mirror``. ``model.base`` (used by sft/grpo/train_eval)
defaults to this stage's output; set it to a hub id such as ``Qwen/Qwen2.5-Coder-7B-Instruct``
(the ``full`` profile) to train a real model instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from codethinker.config import as_dict, load_config
from codethinker.config.bootstrap import BootstrapConfig
from codethinker.data.io import iter_jsonl
from codethinker.ops.stage import path, stage_args, stage_main, stage_run
from codethinker.training.bootstrap import build_tiny_model
from codethinker.training.tokenizer import train_bpe

ARGS = stage_args(
    "bootstrap",
    __doc__,
    corpus=path("tokenizer train: the SFT rows the BPE is learnt on (chat JSONL)", rows=True),
    out=path("the tiny policy's folder (weights, tokenizer, bootstrap.json)"),
)


def corpus_texts(path: Path):
    """Each SFT row as the chat template lays it out (roles, prompt, answer)."""
    for row in iter_jsonl(path, {"messages": list}):
        yield "".join(f"{m['role']}\n{m['content']}\n" for m in row["messages"])


@stage_main
def main(argv: list[str] | None = None) -> None:
    paths = ARGS.parse(argv)
    cfg = load_config(BootstrapConfig)
    p = cfg.as_dict()
    kind = cfg.tokenizer
    if kind == "train":
        texts = list(corpus_texts(paths.corpus))
        if not texts:
            raise SystemExit(f"bootstrap: {paths.corpus} has no rows to train the tokenizer on (run contra_sft first)")
        tokenizer = train_bpe(texts, cfg.vocab_size, cfg.bpe_split)
    elif kind == "mirror":
        tokenizer = Path(os.environ.get("CODETHINKER_TOKENIZER") or cfg.base.tokenizer_mirror or "")
        if not (tokenizer / "vocab.json").is_file() and not (tokenizer / "tokenizer.json").is_file():
            raise SystemExit(f"bootstrap: no tokenizer files in {tokenizer} (set base.tokenizer_mirror)")
    else:
        raise SystemExit(f"bootstrap.tokenizer must be 'train' or 'mirror', got {kind!r}")
    out = paths.out
    with stage_run("bootstrap", p) as run:
        build_tiny_model(out, tokenizer, seed=cfg.base.seed, **as_dict(cfg.shape))
        meta = json.loads((out / "bootstrap.json").read_text())
        run.log_params({"vocab_size": meta["vocab_size"], "parameters": meta["parameters"]})
    print(f"bootstrap: wrote {out} ({meta['parameters']:,} parameters, {meta['tokenizer']})")


if __name__ == "__main__":
    main()
