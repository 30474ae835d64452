"""A GRPO rollout on vLLM: regular samples and DBS rounds sharing the engine's steps (``interleave``) vs one after
the other (regular, then each DBS round as one batch), one run.

    python benchmarks/bench_rollout_interleave.py [--model models/sft/merged]
        [--data data/contra_sft/grpo_train.parquet] [--prompts 12] [--n 4] [--repeats 2]

The real policy and GRPO prompts, the real prefix PRM, GRPO's response limit (1.25 x the longest truth) and
temperature 1: one rollout of ``--prompts`` groups of ``--n`` regular and ``--n`` DBS samples, as
``Rollout.sample`` draws them. Both paths run with the same seeds, alternating, on one engine; the baseline is
the regular samples alone (one ``generate`` call). Not a test: compare the ratio.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class OneAfterAnother:
    """The engine without ``interleave``: run_programs runs the programs in turn, a step's calls as one batch."""

    def __init__(self, engine):
        self.engine = engine

    def continue_requests(self, requests):
        return self.engine.continue_requests(requests)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/sft/merged")
    ap.add_argument("--data", default="data/contra_sft/grpo_train.parquet")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    from transformers import AutoTokenizer

    from codethinker import engines
    from codethinker.contra.tracer import Flow
    from codethinker.contra.validate import prefix_score
    from codethinker.engines.base import PrefixRequest, one_call, run_programs
    from codethinker.sampling.dbs import DBSConfig, DBSRun
    from codethinker.tasks.output_prediction import truth_token_budget
    from codethinker.training.grpo_data import load_grpo_rows

    rows, _ = load_grpo_rows(a.data)
    rows = [r for r in rows if r["source"] == "synth"][: a.prompts]
    limit = truth_token_budget(AutoTokenizer.from_pretrained(a.model), rows, thoughts=False)
    eng = engines.open_engine(a.model, "vllm", seed=0, max_model_len=2048 + limit, max_num_seqs=2 * a.prompts * a.n)
    texts = [eng.apply_chat_template(r["prompt"]) for r in rows]
    scorers = [functools.partial(prefix_score, flow=Flow.from_json(r["truth"])) for r in rows]
    eng.continue_prefixes(texts[:1], 1, stop=[], max_tokens=8, seed=0)  # warm-up

    def programs(seed: int):
        cfg = DBSConfig(budget=a.n, max_tokens=limit, seed=seed + 50_000)
        regular = PrefixRequest(texts, a.n, list(cfg.final_stop), limit, 1.0, seed)
        return [one_call(regular), DBSRun(texts, scorers, cfg).program()]

    out: dict[str, list[dict]] = {"interleaved": [], "one_after_another": [], "regular_alone": []}
    texts_of: dict[str, list[list[str]]] = {"interleaved": [], "one_after_another": []}
    for rep in range(a.repeats):
        order = ("interleaved", "one_after_another") if rep % 2 == 0 else ("one_after_another", "interleaved")
        for name in order:
            engine = eng if name == "interleaved" else OneAfterAnother(eng)
            t0 = time.perf_counter()
            regular, dbs = run_programs(engine, programs(100 + rep))
            wall = time.perf_counter() - t0
            tokens = sum(c.n_tokens for row in regular for c in row) + sum(r.tokens_generated for r in dbs)
            out[name].append({"wall_s": round(wall, 2), "tokens": tokens, "tokens_per_s": round(tokens / wall, 1)})
            drawn = [c.text for row in regular for c in row] + [c.text for r in dbs for c in r.completions]
            texts_of[name].append(drawn)
        t0 = time.perf_counter()
        [reg] = run_programs(eng, programs(100 + rep)[:1])
        wall = time.perf_counter() - t0
        tokens = sum(c.n_tokens for row in reg for c in row)
        out["regular_alone"].append({"wall_s": round(wall, 2), "tokens": tokens})
    mean = {k: sum(r["wall_s"] for r in v) / len(v) for k, v in out.items()}
    summary = {
        "prompts": a.prompts,
        "n_regular": a.n,
        "n_dbs": a.n,
        "limit": limit,
        "same_completions": texts_of["interleaved"] == texts_of["one_after_another"],
        "speedup_interleaved_vs_one_after_another": round(mean["one_after_another"] / mean["interleaved"], 2),
        "interleaved_vs_regular_alone": round(mean["interleaved"] / mean["regular_alone"], 2),
        "runs": out,
    }
    print(json.dumps(summary, indent=1))
    eng.close()


if __name__ == "__main__":
    main()
