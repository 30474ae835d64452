"""train_eval: the before/after metrics on held-out prompts, with a scripted engine and the tiny model."""

from __future__ import annotations

import pytest

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow
from codethinker.engines.base import Completion
from codethinker.training.grpo import load_grpo_rows
from codethinker.training.train_eval import EvalParams, evaluate_engine, run_train_eval


class _Oracle:
    """Answers the true trace for half the prompts and junk for the rest."""

    def __init__(self, rows):
        self.by_prompt = {self.apply_chat_template(r["prompt"]): r["truth"] for r in rows}
        self.calls = 0

    def apply_chat_template(self, messages):
        return messages[-1]["content"]

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        out = []
        for i, p in enumerate(prefixes):
            text = render_trace(Flow.from_json(self.by_prompt[p])) if i % 2 == 0 else "no trace"
            out.append([Completion(text, 10 if i % 2 == 0 else 2, "stop")] * n)
        return out


def test_metrics_from_a_scripted_engine(grpo_parquet):
    rows, _ = load_grpo_rows(grpo_parquet)
    m = evaluate_engine(_Oracle(rows), rows, EvalParams(max_tokens=64))
    assert m["n"] == 4 and m["fmt_rate"] == 0.5 and m["reward"] == 2.0 and m["rcs"] == 0.5
    assert m["answer_acc"] == 0.5 and m["response_tokens"] == 6.0


@pytest.mark.slow
def test_run_train_eval_on_the_tiny_model(tiny_model, grpo_parquet, tmp_path):
    rows, _ = load_grpo_rows(grpo_parquet)
    out = run_train_eval(
        {"before_sft": tiny_model, "after_sft": "models/does-not-exist"},
        rows,
        EvalParams(max_prompts=2, max_tokens=8, engine="hf"),
    )
    assert out["after_sft"] == {"missing": 1.0}
    m = out["before_sft"]
    assert m["n"] == 2 and m["fmt_rate"] == 0.0 and m["reward"] == 0.0 and 1 <= m["response_tokens"] <= 8
