"""Hand-made ground truths (no sandbox needed) -> a tiny SFT JSONL and a tiny GRPO parquet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROGRAMS = [
    (
        "def f(x):\n    y = x + 1\n    return y * 2\n",
        "3",
        [(0, 1, 1, "{'x': 3, 'y': 4}"), (2, 2, 1, "{'x': 3, 'y': 4}")],
        "8",
    ),
    (
        "def f(nums):\n    total = 0\n    for n in nums:\n        total += n\n    return total\n",
        "[1, 2]",
        [
            (0, 1, 1, "{'nums': [1, 2], 'total': 0}"),
            (2, 3, 2, "{'nums': [1, 2], 'total': 3, 'n': 2}"),
            (4, 4, 1, "{'nums': [1, 2], 'total': 3, 'n': 2}"),
        ],
        "3",
    ),
    (
        "def f(s):\n    t = s[::-1]\n    if t == s:\n        return True\n    return False\n",
        "'abc'",
        [
            (0, 1, 1, "{'s': 'abc', 't': 'cba'}"),
            (2, 3, 2, "{'s': 'abc', 't': 'cba'}"),
            (4, 4, 1, "{'s': 'abc', 't': 'cba'}"),
        ],
        "False",
    ),
    (
        "def f(a, b):\n    c = a * b\n    return c - a\n",
        "4, 5",
        [(0, 1, 1, "{'a': 4, 'b': 5, 'c': 20}"), (2, 2, 1, "{'a': 4, 'b': 5, 'c': 20}")],
        "16",
    ),
]


def truths() -> list[str]:
    out = []
    for code, inp, blocks, output in PROGRAMS:
        out.append(
            json.dumps(
                {
                    "version": 1,
                    "entry": "f",
                    "input": inp,
                    "code": code,
                    "blocks": [{"start": s, "end": e, "weight": w, "locals": loc} for s, e, w, loc in blocks],
                    "output": output,
                }
            )
        )
    return out


def write_sft_jsonl(path: Path, repeat: int = 2) -> Path:
    from codethinker.contra.render import render_prompt, render_trace
    from codethinker.contra.tracer import Flow

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for r in range(repeat):
            for i, t in enumerate(truths()):
                flow = Flow.from_json(t)
                msgs = [*render_prompt(flow), {"role": "assistant", "content": render_trace(flow)}]
                fh.write(json.dumps({"id": f"p{i}/{r}", "messages": msgs}) + "\n")
    return path


def grpo_rows() -> list[dict]:
    from codethinker.contra.render import render_prompt
    from codethinker.contra.tracer import Flow

    return [
        {
            "data_source": "tiny",
            "prompt": render_prompt(Flow.from_json(t)),
            "ability": "code_reasoning",
            "reward_model": {"style": "rule", "ground_truth": t},
            "extra_info": {"id": f"p{i}/0", "task_id": f"p{i}", "split": "train", "index": i},
        }
        for i, t in enumerate(truths())
    ]


def write_grpo_parquet(path: Path) -> Path:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(grpo_rows()).to_parquet(path, index=False)
    return path


def tiny_tokenizer() -> Any:
    """A 300-token byte-level BPE trained on the hand-made traces (about a second; no ../shared needed)."""
    from codethinker.contra.render import render_trace
    from codethinker.contra.tracer import Flow
    from codethinker.training.tokenizer import train_bpe

    return train_bpe([render_trace(Flow.from_json(t)) for t in truths()] * 20, vocab_size=300)
