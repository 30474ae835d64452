"""What a greedy gain could take: the held-out prompts where one of SFT's sampled answers beats its greedy one.

    python scripts/greedy_headroom.py --answers data/train_eval/answers.jsonl.gz [--base after_sft] [--new after_grpo]

Reads train_eval's stored answers (every held-out answer with its reward). Per held-out set it prints: the prompts
scored, ``beaten``, the prompts where some sampled answer of ``--base`` scores above its greedy answer, and
``best-of-k``, what the mean greedy reward would gain if each of those answers became its best sample. Where the
``--new`` model (GRPO) was scored too, its greedy change is split over the beaten prompts and the rest: the
answers up and down (of them on beaten prompts), and the change of the mean from each part (the two add up to
GRPO - SFT). docs/training.md, "What a greedy gain could take", reads these for the default's runs.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from codethinker.data.io import RecordError, read_jsonl


def headroom(answers: list[dict], base: str = "after_sft", new: str = "after_grpo") -> dict[str, dict]:
    """Per held-out set, the beaten prompts and, with ``new`` scored, the greedy change split over them.

    >>> a = [dict(model="sft", set="s", id=i, **{"pass": p}, reward=r) for i, p, r in
    ...      [(1, "greedy", 0), (1, "sampled", 4), (2, "greedy", 4), (2, "sampled", 0)]]
    >>> a += [dict(model="grpo", set="s", id=i, **{"pass": "greedy"}, reward=r) for i, r in [(1, 4), (2, 0)]]
    >>> r = headroom(a, "sft", "grpo")["s"]
    >>> r["n"], r["beaten"], r["best_of_k"], r["up"], r["down"], r["diff_beaten"], r["diff_rest"]
    (2, 1, 2.0, 1, 1, 2.0, -2.0)
    """
    greedy: dict[tuple[str, str], dict] = defaultdict(dict)  # (model, set) -> prompt id -> reward
    sampled: dict[str, dict] = defaultdict(lambda: defaultdict(list))  # set -> prompt id -> base's sampled rewards
    for a in answers:
        if a["pass"] == "greedy":
            greedy[a["model"], a["set"]][a["id"]] = float(a["reward"])
        elif a["model"] == base:
            sampled[a["set"]][a["id"]].append(float(a["reward"]))
    out = {}
    for (model, kind), g in greedy.items():
        if model != base or kind not in sampled:
            continue
        best = {i: max(sampled[kind][i]) for i in g if i in sampled[kind]}
        beaten = {i for i, b in best.items() if b > g[i]}
        n = len(g)
        row = {"n": n, "beaten": len(beaten), "best_of_k": sum(best[i] - g[i] for i in beaten) / n}
        after = greedy.get((new, kind))
        if after:
            d = {i: after[i] - g[i] for i in g if i in after}
            up, down = {i for i, x in d.items() if x > 0}, {i for i, x in d.items() if x < 0}
            row |= {"up": len(up), "up_beaten": len(up & beaten), "down": len(down), "down_beaten": len(down & beaten)}
            row |= {"diff_beaten": sum(d[i] for i in beaten if i in d) / n}
            row |= {"diff_rest": sum(x for i, x in d.items() if i not in beaten) / n}
        out[kind] = row
    return out


KEYS = {"model": str, "pass": str, "set": str, "id": str, "reward": (int, float)}  # what headroom reads of a row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=Path, required=True, help="train_eval's answers (gzipped JSONL)")
    ap.add_argument("--base", default="after_sft", help="the model whose greedy and sampled answers are compared")
    ap.add_argument("--new", default="after_grpo", help="the model whose greedy change is split (if scored)")
    a = ap.parse_args(argv)
    try:
        answers = read_jsonl(a.answers, KEYS)
    except RecordError as exc:
        print(exc, file=sys.stderr)
        return 2
    rows = headroom(answers, a.base, a.new)
    if not rows:
        print(f"{a.answers}: no held-out set has both greedy and sampled answers of {a.base}", file=sys.stderr)
        return 2
    for kind, r in rows.items():
        line = f"{kind}: {r['n']} prompts, beaten {r['beaten']}, best-of-k {r['best_of_k']:+.3f}"
        if "up" in r:
            line += (
                f" | {a.new}: up {r['up']} ({r['up_beaten']} beaten), down {r['down']} ({r['down_beaten']} beaten),"
                f" on beaten {r['diff_beaten']:+.3f}, on the rest {r['diff_rest']:+.3f}"
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
