"""Stage bootstrap: the tiny random Qwen2 policy the default profile trains.

    python -m stages.bootstrap            # -> models/base (weights, tokenizer, ChatML template)

Reads ``bootstrap`` (shape) and ``base.tokenizer_mirror`` (the real Qwen2 tokenizer files).
``model.base`` (used by sft/grpo/train_eval) defaults to this stage's output; set it to a hub id
such as ``Qwen/Qwen2.5-Coder-7B-Instruct`` or a local path to train a real model instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from codethinker.params import load_section
from codethinker.tracking import stage_run
from codethinker.training.bootstrap import TinyShape, build_tiny_model


def main() -> None:
    p = load_section("bootstrap")
    base = p["base"]
    tok_dir = Path(os.environ.get("CODETHINKER_TOKENIZER") or base.get("tokenizer_mirror", ""))
    if not (tok_dir / "vocab.json").is_file() and not (tok_dir / "tokenizer.json").is_file():
        raise SystemExit(f"bootstrap: no tokenizer files in {tok_dir} (set base.tokenizer_mirror)")
    shape = {k: v for k, v in (p.get("shape") or {}).items() if k in TinyShape.__dataclass_fields__}
    out = Path(p.get("out", "models/base"))
    with stage_run("bootstrap", p) as run:
        build_tiny_model(out, tok_dir, seed=int(base.get("seed", 0)), **shape)
        meta = json.loads((out / "bootstrap.json").read_text())
        run.log_params({"vocab_size": meta["vocab_size"]})
    print(f"bootstrap: wrote {out} (vocab {meta['vocab_size']}, shape {meta['shape']})")


if __name__ == "__main__":
    main()
