"""A DBS round on the HF engine: one ``generate`` call per (budget, limit) group vs one batched call, one run.

    python benchmarks/bench_hf_rounds.py [--model DIR] [--prompts 16] [--budget 4] [--limit 64] [--repeats 2]
        [--batch-size 64] [--caches dynamic,static] [--json out.json]

The round is the second round of a real :class:`~codethinker.sampling.dbs.DBSRun` (:func:`dbs_round`): every
prompt's first round of ``budget`` continuations is made up (limit/8 to limit/2 tokens of words, ending at the block
stop, seeded scores), so DBS's own allocation splits each prompt's budget over its best prefixes, each prefix with the
tokens it has left: a round of many small groups, as GRPO's rounds are. Both paths run the same requests with
the same seeds on one engine, alternating; ``per_group`` is DBS on an engine without ``continue_requests``
(one ``continue_prefixes`` call per group), ``batched`` is ``HFEngine.continue_requests`` (one padded
``generate`` batch, chunks of ``--batch-size`` sequences), once per KV cache in ``--caches``. Without
``--model`` the model is random-weight Qwen2 in the micro shape (the tiny test model's) with the Qwen2
tokenizer (``../shared/models/qwen2-tokenizer`` or ``--tokenizer``); it never writes a stop string, so every
continuation runs to its prefix's remaining tokens. Reported per path: wall seconds, tokens, tokens/s,
``generate`` calls; the speedup of each batched path over per-group calls and whether they sampled the same
completions. Not a test: compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def dbs_round(prompts: list[str], budget: int, limit: int, seed: int = 0) -> list[Any]:
    """The requests of a DBS run's second round on ``prompts`` (a made-up first round; module docstring)."""
    from codethinker.engines.base import Completion
    from codethinker.sampling.dbs import DBSConfig, DBSRun

    rng = random.Random(seed)
    words = ["x", "value", "return", "list", "index", "=", "1", "+", "loop", "item"]
    scores: dict[str, float] = {}

    def score(text: str) -> float:
        return scores.setdefault(text, float(rng.randint(0, 2)))  # ties: budgets split over several prefixes

    cfg = DBSConfig(budget=budget, max_tokens=limit, temperature=1.0, seed=seed)
    run = DBSRun(prompts, [score] * len(prompts), cfg)
    first = run.requests()
    stop = cfg.block_stop[0]
    made = []
    for req in first:
        rows = []
        for _ in req.prefixes:
            n_tok = [rng.randint(max(1, limit // 8), max(1, limit // 2)) for _ in range(req.n)]
            rows.append([Completion(" ".join(rng.choices(words, k=k)) + stop, k, "stop") for k in n_tok])
        made.append(rows)
    run.feed(made)
    return run.requests()


class Counted:
    """The engine seen without ``continue_requests`` (DBS's per-group calls), counting ``generate`` calls."""

    def __init__(self, engine: Any):
        self.engine, self.calls = engine, 0
        real = engine.model.generate

        def generate(*a: Any, **kw: Any) -> Any:
            self.calls += 1
            return real(*a, **kw)

        engine.model.generate = generate

    def continue_prefixes(self, *a: Any, **kw: Any) -> Any:
        return self.engine.continue_prefixes(*a, **kw)


def measure(engine: Any, counted: Counted, reqs: list[Any], batched: bool) -> dict[str, Any]:
    """One path on the round: wall seconds, tokens, tokens/s, ``generate`` calls and the completions."""
    from codethinker.engines.base import continue_requests

    sync = _sync()
    before = counted.calls
    sync()
    t0 = time.perf_counter()
    out = continue_requests(engine if batched else counted, reqs)
    sync()
    wall = time.perf_counter() - t0
    done = [c for res in out for row in res for c in row]
    tokens = sum(c.n_tokens for c in done)
    return {"wall_s": round(wall, 3), "tokens": tokens, "tokens_per_s": round(tokens / wall, 1),
            "generate_calls": counted.calls - before, "texts": [c.text for c in done]}  # fmt: skip


def _sync() -> Any:
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)


def compare(engines: dict[str, Any], prompts: list[str], budget: int, limit: int, repeats: int) -> dict[str, Any]:
    """Per-group calls on ``engines["dynamic"]`` against one batched call on each engine (one per cache), the
    same round and seeds, ``repeats`` times in alternating order (the engines share one model)."""
    from codethinker.engines.base import PrefixRequest

    base = engines["dynamic"]
    counted = Counted(base)  # counts the shared model's generate calls
    reqs = dbs_round(prompts, budget, limit)
    names = ["per_group", *(f"batched_{c}" for c in engines)]
    warm = [PrefixRequest(reqs[0].prefixes[:1], 1, reqs[0].stop, 4, 1.0, 0)]
    for eng in engines.values():  # a warm-up: allocations, a static cache's first shapes
        eng.continue_requests(warm)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for rep in range(repeats):
        for name in names if rep % 2 == 0 else names[::-1]:
            batched = name != "per_group"
            eng = engines[name.removeprefix("batched_")] if batched else base
            runs[name].append(measure(eng, counted, reqs, batched))
    texts = runs["per_group"][0]["texts"]
    mean = {n: sum(r["wall_s"] for r in rs) / len(rs) for n, rs in runs.items()}
    out: dict[str, Any] = {
        "groups": len(reqs),
        "sequences": sum(len(r.prefixes) * r.n for r in reqs),
        "limits": sorted({r.max_tokens for r in reqs}),
        "same_completions": {n: all(r["texts"] == texts for r in rs) for n, rs in runs.items() if n != "per_group"},
        "speedup_vs_per_group": {n: round(mean["per_group"] / mean[n], 2) for n in names if n != "per_group"},
    }
    for rs in runs.values():
        for r in rs:
            r.pop("texts")
    out["runs"] = runs
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="a model folder (default: random micro-shape Qwen2)")
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared" / "models" / "qwen2-tokenizer"))
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--budget", type=int, default=4)
    ap.add_argument("--limit", type=int, default=64, help="DBS's trajectory limit, tokens")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64, help="the HF engine's cap on sequences per generate")
    ap.add_argument("--caches", default="dynamic,static", help="batched paths: comma-separated KV caches")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    a = ap.parse_args()
    from codethinker.logs import quiet_libraries

    quiet_libraries()
    import torch

    from codethinker.engines.hf import HFEngine

    caches = [c for c in a.caches.split(",") if c]
    if "dynamic" not in caches:
        caches.insert(0, "dynamic")  # the per-group baseline's engine
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({torch.get_num_threads()} threads)"
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model
        if model is None:
            from codethinker.training.bootstrap import build_tiny_model

            model = str(build_tiny_model(Path(tmp) / "m", a.tokenizer, seed=0))
        dev = "cuda" if torch.cuda.is_available() else None
        engines = {c: HFEngine(model, device=dev, batch_size=a.batch_size, cache=c) for c in caches[:1]}
        for c in caches[1:]:
            engines[c] = HFEngine(engines["dynamic"].model, engines["dynamic"].tokenizer, batch_size=a.batch_size,
                                  cache=c)  # fmt: skip
        questions = [f"Trace f({i}) where f(x) returns x * {i % 7} + 1, block by block." for i in range(a.prompts)]
        prompts = [engines["dynamic"].apply_chat_template([{"role": "user", "content": q}]) for q in questions]
        res = {"device": device, "model": a.model or "random micro-shape Qwen2", "prompts": a.prompts,
               "budget": a.budget, "limit": a.limit, "batch_size": a.batch_size, "torch": torch.__version__,
               **compare(engines, prompts, a.budget, a.limit, a.repeats)}  # fmt: skip
    print(json.dumps(res, indent=1))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
