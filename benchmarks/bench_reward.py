"""CRM reward throughput on real-length traces (scores per second on one core).

    python benchmarks/bench_reward.py [--n 400] [--repeat 3]

Rollouts are ground-truth traces of CRUXEval programs (from the local mirror) with a thought
per block, in three kinds, scored in one process: exact (LOCALS text identical to the truth),
respaced (every LOCALS with other spacing around punctuation: equal without parsing, see
``validate._compact``), reparsed (every non-empty LOCALS with a trailing comma, so each is parsed
with ``ast.literal_eval``), and wrong (block 2's LOCALS changed). The baseline in the
same run is ``ast.literal_eval`` of every LOCALS line alone, the floor of any literal check.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import time
from pathlib import Path

from codethinker.contra.render import render_trace
from codethinker.contra.tracer import trace_many
from codethinker.rewards.crm import crm_score

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cruxeval" / "cruxeval.jsonl"


def rollouts(n: int) -> list[tuple[str, object, str]]:
    rows = [json.loads(line) for line in MIRROR.read_text().splitlines()][:n]
    outs = trace_many([(r["code"], r["input"], "f") for r in rows])
    cases = []
    for o in outs:
        if not o.ok:
            continue
        f = o.flow
        thoughts = [f"Block {i} runs; the loop body updates the running values as shown." for i in range(len(f.blocks))]
        text = render_trace(f, thoughts)
        cases.append((text, f, "exact"))
        spaced = text
        for b in f.blocks:
            spaced = spaced.replace("\n" + b.locals_text + "\n", "\n" + b.locals_text.replace(", ", " ,  ") + "\n", 1)
        cases.append((spaced, f, "respaced"))
        comma = text
        for b in f.blocks:
            if b.locals_text != "{}":
                comma = comma.replace("\n" + b.locals_text + "\n", "\n" + b.locals_text[:-1] + ",}\n", 1)
        cases.append((comma, f, "reparsed"))
        last = f.blocks[min(1, len(f.blocks) - 1)]
        wrong = text.replace("\n" + last.locals_text + "\n", "\n{'zz': 1}\n", 1)
        cases.append((wrong, f, "wrong"))
    return cases


def bench(fn, items, repeat: int) -> tuple[float, float]:
    """Best rate over ``repeat`` passes: (per CPU-second of this process, per wall second).

    One process on one core: CPU seconds are what a core delivers, whatever else the machine runs.
    """
    cpu, wall = [], []
    for _ in range(repeat):
        c, t = time.process_time(), time.perf_counter()
        for it in items:
            fn(it)
        cpu.append(len(items) / (time.process_time() - c))
        wall.append(len(items) / (time.perf_counter() - t))
    return max(cpu), max(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cases = rollouts(a.n)
    lines = sum(len(c[0].splitlines()) for c in cases) / len(cases)
    print(f"{len(cases)} rollouts, mean {lines:.0f} lines, mean {statistics.mean(len(c[0]) for c in cases):.0f} chars")
    base, base_wall = bench(lambda c: [ast.literal_eval(b.locals_text) for b in c[1].blocks], cases, a.repeat)
    print(f"baseline literal_eval of the LOCALS alone: {base:,.0f} /CPU-s ({base_wall:,.0f} /wall-s)")
    for kind in ("exact", "respaced", "reparsed", "wrong", "all"):
        items = [c for c in cases if kind in ("all", c[2])]
        rate, wall = bench(lambda c: crm_score(c[0], c[1]), items, a.repeat)
        print(
            f"CRM scores per core-second [{kind:>9}]: {rate:,.0f} ({wall:,.0f} /wall-s)  "
            f"{rate / base:.2f}x the literal_eval baseline"
        )


if __name__ == "__main__":
    main()
