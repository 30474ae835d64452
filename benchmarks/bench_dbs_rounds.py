"""DBS on vLLM: a round as one engine batch (``continue_requests``) vs one call per (budget, limit), one run.

    python benchmarks/bench_dbs_rounds.py [--model models/sft/merged] [--data data/contra_sft/grpo_train.parquet]
        [--prompts 12] [--budget 4] [--repeats 2]

The real policy and GRPO prompts (the generated programs), the real prefix PRM (``prefix_score``), GRPO's
response limit (1.25 x the longest truth) and temperature 1. Within a DBS round the live prefixes have different
budgets and token limits (each trajectory's remaining tokens), so without batching a round is several small
vLLM calls, each bound by the engine's per-step latency on CPU. Both paths run with the same seeds, alternating,
on one engine; a regular-sampling call of the same budget is the baseline. Not a test: compare the ratio.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class PerCall:
    """The engine without ``continue_requests``: DBS falls back to one call per request."""

    def __init__(self, engine):
        self.engine = engine

    def continue_prefixes(self, *a, **kw):
        self.calls = getattr(self, "calls", 0) + 1
        return self.engine.continue_prefixes(*a, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/sft/merged")
    ap.add_argument("--data", default="data/contra_sft/grpo_train.parquet")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--budget", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    from transformers import AutoTokenizer

    from codethinker import engines
    from codethinker.contra.tracer import Flow
    from codethinker.contra.validate import prefix_score
    from codethinker.sampling.dbs import DBSConfig, dbs_sample
    from codethinker.tasks.output_prediction import truth_token_budget
    from codethinker.training.grpo_data import load_grpo_rows

    rows, _ = load_grpo_rows(a.data)
    rows = [r for r in rows if r["source"] == "synth"][: a.prompts]
    limit = truth_token_budget(AutoTokenizer.from_pretrained(a.model), rows, thoughts=False)
    eng = engines.open_engine(a.model, "vllm", seed=0, max_model_len=2048 + limit, max_num_seqs=a.prompts * a.budget)
    texts = [eng.apply_chat_template(r["prompt"]) for r in rows]
    scorers = [functools.partial(prefix_score, flow=Flow.from_json(r["truth"])) for r in rows]
    eng.continue_prefixes(texts[:1], 1, stop=[], max_tokens=8, seed=0)  # warm-up
    out: dict[str, list[dict]] = {"batched_rounds": [], "call_per_request": [], "regular": []}
    for rep in range(a.repeats):
        cfg = DBSConfig(budget=a.budget, max_tokens=limit, seed=100 + rep)
        for name in ("batched_rounds", "call_per_request") if rep % 2 == 0 else ("call_per_request", "batched_rounds"):
            engine = eng if name == "batched_rounds" else PerCall(eng)
            t0 = time.perf_counter()
            res = dbs_sample(engine, texts, scorers, cfg)
            wall = time.perf_counter() - t0
            tokens = sum(r.tokens_generated for r in res)
            out[name].append(
                {
                    "wall_s": round(wall, 2),
                    "tokens": tokens,
                    "tokens_per_s": round(tokens / wall, 1),
                    "rounds": max(r.rounds for r in res),
                    "engine_calls": getattr(engine, "calls", max(r.rounds for r in res)),
                    "texts": [c.text for r in res for c in r.completions],
                }
            )
        t0 = time.perf_counter()
        reg = eng.continue_prefixes(texts, a.budget, stop=list(cfg.final_stop), max_tokens=limit, seed=100 + rep)
        wall = time.perf_counter() - t0
        tokens = sum(c.n_tokens for row in reg for c in row)
        out["regular"].append({"wall_s": round(wall, 2), "tokens": tokens, "tokens_per_s": round(tokens / wall, 1)})
    same = all(b["texts"] == c["texts"] for b, c in zip(out["batched_rounds"], out["call_per_request"], strict=True))
    for runs in out.values():
        for r in runs:
            r.pop("texts", None)
    mean = {k: sum(r["wall_s"] for r in v) / len(v) for k, v in out.items()}
    summary = {
        "prompts": a.prompts,
        "budget": a.budget,
        "limit": limit,
        "same_trajectories": same,
        "speedup_batched_vs_per_call": round(mean["call_per_request"] / mean["batched_rounds"], 2),
        "runs": out,
    }
    print(json.dumps(summary, indent=1))
    eng.close()


if __name__ == "__main__":
    main()
