"""Evaluation generation speed: vLLM against transformers' generate, same prompts, one run.

    python benchmarks/bench_eval_generation.py [--model models/base] [--samples 200] [--max-tokens 32]

Prompts are zero-shot ConTra prompts of the first ``--samples`` CRUXEval-O programs (mirror);
both engines answer them once (seed 0, temperature 0.2, the evaluate stage's settings) through the
harness's own code path (:func:`codethinker.evaluation.harness.evaluate_samples`). transformers
runs first, in this process; vLLM second (its engine runs in a child process). Reported per
engine: load seconds, generation seconds, generated tokens, tokens/s; and the ratio. Timings on
shared machines vary with load: compare the ratio, measured in one run.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from codethinker.evaluation.benchmarks import prepare
from codethinker.evaluation.harness import EvalConfig, ModelSpec, close_engine, evaluate_samples, open_engine

ROOT = Path(__file__).resolve().parents[1]


def measure(backend: str, spec: ModelSpec, samples: list, config: EvalConfig, options: dict) -> dict:
    t0 = time.perf_counter()
    engine = open_engine(spec, backend, **options)
    load = time.perf_counter() - t0
    try:
        records, timing = evaluate_samples(engine, samples, spec.format, config)
    finally:
        close_engine(engine)
    seconds = sum(t["seconds"] for t in timing)
    tokens = sum(t["tokens"] for t in timing)
    return {
        "backend": backend,
        "load_s": round(load, 1),
        "gen_s": round(seconds, 1),
        "tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 1),
        "answers": len(records),
        "truncated": sum(r["finish"] == "length" for r in records),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "base"), help="model folder (default models/base)")
    ap.add_argument("--mirror", default=str(ROOT.parent / "shared" / "data"), help="data mirror folder")
    ap.add_argument("--samples", type=int, default=200, help="CRUXEval-O prompts (default 200)")
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens per answer (default 32, the default profile)")
    ap.add_argument("--hf-batch", type=int, default=32, help="transformers: prompts per generate call")
    ap.add_argument("--backends", default="hf,vllm", help="comma-separated, in order (default hf,vllm)")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()

    samples = prepare("cruxeval", Path(args.mirror), download=False).samples[: args.samples]
    spec = ModelSpec("bench", args.model)
    config = EvalConfig(runs=1, temperature=0.2, max_tokens=args.max_tokens, seed=0)
    options = {
        "hf": {"batch_size": args.hf_batch},
        "vllm": {"dtype": "float32", "enforce_eager": True},  # the default profile's engine settings
    }
    rows = [measure(b, spec, samples, config, options[b]) for b in args.backends.split(",")]
    by = {r["backend"]: r for r in rows}
    ratio = by["vllm"]["tokens_per_s"] / by["hf"]["tokens_per_s"] if {"hf", "vllm"} <= set(by) else None
    print(f"{len(samples)} CRUXEval-O prompts x 1 answer, max_tokens {args.max_tokens}, {platform.processor() or ''}")
    print("| engine | load s | generation s | tokens | tokens/s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['load_s']} | {r['gen_s']} | {r['tokens']} | {r['tokens_per_s']} |")
    if ratio:
        print(f"vLLM / transformers tokens/s: {ratio:.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "ratio": ratio, "samples": len(samples)}, indent=2))


if __name__ == "__main__":
    main()
