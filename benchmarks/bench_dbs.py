"""DBS vs regular sampling at the same final budget, on a simulated policy (not a test).

    python benchmarks/bench_dbs.py [--prompts 2000] [--budget 4] [--seed 0]

The simulated policy writes a trace block by block; each block is right with probability p
(independently), and the final answer is right with probability p when every block was right
(else with probability p/4). Programs have 4 to 8 blocks with CCW weights 1-3; a block costs
40-80 tokens, the RETURN part 20. Rewards follow CRM (SPEC §4): R_proc (prefix consistency,
CCW-weighted), R_res gated on R_proc == 2. DBS uses the real :func:`dbs_sample` with the prefix
score "weight of the prefix-consistent blocks so far"; regular sampling draws ``budget`` whole
traces. Reported per p: mean reward, max reward per prompt, fully-consistent rate, tokens per
prompt (DBS: generated, including dropped).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codethinker.engines.base import Completion
from codethinker.sampling.dbs import DBSConfig, dbs_sample

BLOCK = re.compile(r"<b(\d)>")


class SimPolicy:
    """Engine over prompts "P<i>|<n blocks>|<weights>": each continuation is the next block."""

    def __init__(self, p: float, rng: random.Random):
        self.p, self.rng = p, rng

    def _next(self, prompt: str, done: str) -> Completion:
        n_blocks = int(prompt.split("|")[1])
        k = len(BLOCK.findall(done))
        if k < n_blocks:
            ok = self.rng.random() < self.p
            return Completion(f"<b{int(ok)}>[/LOCALS]", self.rng.randint(40, 80), "stop")
        all_ok = all(x == "1" for x in BLOCK.findall(done))
        right = self.rng.random() < (self.p if all_ok else self.p / 4)
        return Completion(f"<a{int(right)}>[/TRACE]", 20, "stop")

    def continue_prefixes(self, prefixes, n, *, stop, max_tokens, temperature=1.0, seed=None):
        out = []
        for pre in prefixes:
            prompt, _, done = pre.partition("#")
            row = []
            for _ in range(n):
                text, tokens = "", 0
                while True:  # without the block stop string, run to the end of the trace
                    c = self._next(prompt, done + text)
                    text, tokens = text + c.text, tokens + c.n_tokens
                    if "[/LOCALS]" in stop or c.text.endswith("[/TRACE]"):
                        break
                row.append(Completion(text, tokens, "stop"))
            out.append(row)
        return out

    def apply_chat_template(self, messages):
        return messages[-1]["content"]


def reward(text: str, weights: list[int]) -> tuple[float, bool]:
    d = [x == "1" for x in BLOCK.findall(text)]
    prod, total = 1, 0.0
    for di, w in zip(d, weights, strict=False):
        prod *= di
        total += w * prod
    r_proc = 2 * total / sum(weights)
    right = "<a1>" in text
    full = r_proc == 2.0
    return r_proc + (2.0 * right if full else 0.0), full


def prefix_score(text: str, weights: list[int]) -> float:
    s = 0.0
    for x, w in zip(BLOCK.findall(text), weights, strict=False):
        if x != "1":
            break
        s += w
    return s


def run(p: float, prompts: int, budget: int, seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    eng = SimPolicy(p, rng)
    specs = []
    for i in range(prompts):
        n = rng.randint(4, 8)
        specs.append((f"P{i}|{n}|#", [rng.randint(1, 3) for _ in range(n)]))
    res: dict[str, dict[str, list[float]]] = {
        k: {"mean": [], "max": [], "full": [], "tokens": []} for k in ("regular", "dbs")
    }
    regular = eng.continue_prefixes([s for s, _ in specs], budget, stop=["[/TRACE]"], max_tokens=10**6)
    for (_, w), row in zip(specs, regular, strict=True):
        scored = [reward(c.text, w) for c in row]
        res["regular"]["mean"].append(statistics.mean(r for r, _ in scored))
        res["regular"]["max"].append(max(r for r, _ in scored))
        res["regular"]["full"].append(statistics.mean(f for _, f in scored))
        res["regular"]["tokens"].append(sum(c.n_tokens for c in row))
    scorers = [lambda t, w=w: prefix_score(t, w) for _, w in specs]
    dbs = dbs_sample(eng, [s for s, _ in specs], scorers, DBSConfig(budget=budget, max_tokens=10**6))
    for (_, w), r in zip(specs, dbs, strict=True):
        scored = [reward(c.text, w) for c in r.completions]
        res["dbs"]["mean"].append(statistics.mean(x for x, _ in scored))
        res["dbs"]["max"].append(max(x for x, _ in scored))
        res["dbs"]["full"].append(statistics.mean(f for _, f in scored))
        res["dbs"]["tokens"].append(r.tokens_generated)
        res["dbs"].setdefault("dropped", []).append(r.tokens_dropped)
    return {k: {m: statistics.mean(v) for m, v in d.items()} for k, d in res.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=2000)
    ap.add_argument("--budget", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.time()
    print(f"budget {a.budget} final trajectories per prompt, {a.prompts} simulated prompts, 4-8 blocks\n")
    print("| p | sampler | mean reward | max reward | fully consistent | tokens/prompt | dropped/prompt |")
    print("|---|---|---|---|---|---|---|")
    for p in (0.5, 0.7, 0.9):
        out = run(p, a.prompts, a.budget, a.seed)
        for k in ("regular", "dbs"):
            m = out[k]
            print(
                f"| {p} | {k} | {m['mean']:.3f} | {m['max']:.3f} | {m['full']:.3f} | {m['tokens']:.0f} | "
                f"{m.get('dropped', 0):.0f} |"
            )
    print(f"\n({time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
