"""Rollout throughput: vLLM (the CPU build here) vs transformers' generate, same tiny model, one run.

    python benchmarks/bench_rollout.py [--model models/base] [--prompts 16] [--n 4] [--max-tokens 128]

Both go through the project's engines (:class:`VLLMEngine`, :class:`HFEngine`) with the same chat
prompts, ``n`` samples each, no stop strings, temperature 1; throughput = generated tokens / wall
time of the generation call (model loading excluded, one warm-up call each). Not a test; compare
the ratio, not absolute figures (this machine's speed varies up to 5x with load).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(engine, prompts: list[str], n: int, max_tokens: int) -> dict[str, float]:
    engine.continue_prefixes(prompts[:1], 1, stop=[], max_tokens=8, seed=0)  # warm-up
    t0 = time.perf_counter()
    out = engine.continue_prefixes(prompts, n, stop=[], max_tokens=max_tokens, seed=1)
    wall = time.perf_counter() - t0
    tokens = sum(c.n_tokens for row in out for c in row)
    return {"tokens": tokens, "wall_s": round(wall, 2), "tokens_per_s": round(tokens / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/base")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--hf-batch", type=int, default=16, help="sequences per transformers generate call")
    a = ap.parse_args()
    from codethinker.engines.hf import HFEngine
    from codethinker.engines.vllm import VLLMEngine

    questions = [f"Trace f({i}) where f(x) returns x * {i % 7} + 1, block by block." for i in range(a.prompts)]
    t0 = time.perf_counter()
    hf = HFEngine(a.model, batch_size=a.hf_batch)
    hf_load = time.perf_counter() - t0
    prompts = [hf.apply_chat_template([{"role": "user", "content": q}]) for q in questions]
    res = {"hf": measure(hf, prompts, a.n, a.max_tokens)}
    res["hf"]["load_s"] = round(hf_load, 1)
    del hf
    t0 = time.perf_counter()
    vl = VLLMEngine(a.model, max_model_len=2048, dtype="float32")
    v_load = time.perf_counter() - t0
    res["vllm"] = measure(vl, prompts, a.n, a.max_tokens)
    res["vllm"]["load_s"] = round(v_load, 1)
    vl.close()
    res["speedup"] = round(res["vllm"]["tokens_per_s"] / res["hf"]["tokens_per_s"], 2)
    res["setup"] = {"model": a.model, "prompts": a.prompts, "n": a.n, "max_tokens": a.max_tokens}
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
