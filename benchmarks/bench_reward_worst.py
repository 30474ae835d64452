"""The CRM reward's worst case: CPU time per KB of hostile rollouts at growing sizes (must stay flat).

    python benchmarks/bench_reward_worst.py [--sizes 4,64,256,1024] [--repeat 3] [--only NAME] [--no-gc]

For every size (KB of rollout text) the truth is built to fit: ``ceil(size / 128 KB)`` blocks
(each LOCALS below the 200,000-character cap) whose LOCALS are ``{'n': -1000, 's': 'xy', 'p':
[0, 1, ...]}``. The baselines, in the same run, are normal rollouts of the same size: the truth's
own trace (``normal exact``) and the same with every LOCALS re-spaced (``normal respaced``).
The hostile rollouts use a truth a quarter that size and fill each LOCALS to the 4x length the
validator allows, with:

``ws in number``       ``-1<spaces>000``: the issue's quadratic case (was 19.5 s per 55,000 spaces)
``ws after minus``     ``-<spaces>1000``: legal Python, equal to the truth (parsed)
``ws between strs``    ``'x'<spaces>'y'``: adjacent strings, equal to the truth (parsed)
``ws everywhere``      runs of `` \\t\\n\\f`` after every comma: equal on the fast path
``unicode ws``         ``\\xa0`` runs after every comma: not white space to Python, rejected
``deep nesting``       ``p`` holds lists nested 190 deep, over and over
``same-hash set``      ``p`` is a set of ints that all hash to 0 (rejected past 32 members)
``huge int``           ``p`` is one number of the whole length (rejected past 4,300 digits)
``long thought``       the normal trace with one THOUGHT line of the whole length
``tag-like lines``     the normal trace with a THOUGHT of lines ``[/LOCALS]x``

Each cell is the best of ``--repeat`` runs of ``crm_score`` (CPU time of this process, one core),
in microseconds per KB; ``ratio`` is the largest size's cell over the smallest's and ``last x4``
the largest over the one before (1.0 = linear; a quadratic pass grows with the size ratio: 256x
from 4 KB to 1 MB). LOCALS stop growing at 128 KB (256 KB and up add blocks instead), so
``last x4`` measures growth in the number of blocks, ``ratio`` also growth inside one literal.
``--no-gc`` scores with the cyclic garbage collector off, to separate the parser's own cost from
the collector's passes over the many container objects a bracket-dense literal builds.
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from collections.abc import Callable

from codethinker.contra.blocks import split_blocks
from codethinker.contra.normalize import normalize_source
from codethinker.contra.render import render_trace
from codethinker.contra.tracer import Flow
from codethinker.contra.values import literal_repr
from codethinker.rewards.crm import crm_score

BLOCK_CHARS = 128 * 1024
HASH_MOD = 2**61 - 1


def make_flow(blocks: int, locals_chars: int) -> Flow:
    """A truth of ``blocks`` blocks, each LOCALS about ``locals_chars`` characters long."""
    src = "def f(n):\n" + "".join(f"    a{i} = n\n" for i in range(blocks - 1)) + "    return n\n"
    prog = normalize_source(src, "f")
    specs = split_blocks(prog)
    assert len(specs) == blocks, len(specs)
    k = max(1, (locals_chars - 40) // 7)  # "12345, " is 7 characters
    loc = literal_repr({"n": -1000, "s": "xy", "p": list(range(10_000, 10_000 + k))})
    return Flow.from_dict(
        {
            "version": 1,
            "entry": "f",
            "input": "2",
            "code": prog.text,
            "blocks": [{"start": s.start, "end": s.end, "weight": s.weight, "locals": loc} for s in specs],
            "output": "2",
        }
    )


def with_locals(flow: Flow, change: Callable[[str, int], str], target: int) -> str:
    """The truth's trace with every LOCALS replaced by ``change(truth_text, target)`` (every block
    holds the same LOCALS text; ``target`` is the length to fill, at most the 4x the validator allows)."""
    truth = flow.blocks[0].locals_text
    target = min(target, 4 * len(truth) + 4096)
    return render_trace(flow).replace("\n" + truth + "\n", "\n" + change(truth, target) + "\n")


def pad(truth: str, old: str, left: str, right: str, target: int, fill: str = " ") -> str:
    run = fill * max(0, target - len(truth) - len(left) - len(right) + len(old))
    return truth.replace(old, left + run + right, 1)


def spread(truth: str, target: int, unit: str) -> str:
    commas = truth.count(", ")
    each = max(1, (target - len(truth)) // max(1, commas) // len(unit))
    return truth.replace(", ", "," + unit * each)


def respace(truth: str, _: int) -> str:
    return truth.replace(", ", " ,  ").replace(": ", " :")


def head(truth: str) -> str:
    return truth[: truth.index("'p': ") + 5]


HOSTILE: dict[str, Callable[[str, int], str]] = {
    "ws in number": lambda t, n: pad(t, "-1000", "-1", "000", n),
    "ws after minus": lambda t, n: pad(t, "-1000", "-", "1000", n),
    "ws between strs": lambda t, n: pad(t, "'xy'", "'x'", "'y'", n),
    "ws everywhere": lambda t, n: spread(t, n, " \t\n\f "),
    "unicode ws": lambda t, n: spread(t, n, "\xa0"),
    "deep nesting": lambda t, n: head(t) + "[" + ", ".join(["[" * 190 + "0" + "]" * 190] * (n // 385 - 1)) + "]}",
    "same-hash set": lambda t, n: head(t) + "{" + ", ".join(str(k * HASH_MOD) for k in range(1, n // 25)) + "}}",
    "huge int": lambda t, n: head(t) + "7" * (n - len(head(t)) - 1) + "}",
}


def long_thought(flow: Flow, size: int) -> str:
    return render_trace(flow, ["x" * size] + [""] * (len(flow.blocks) - 1))


def tag_lines(flow: Flow, size: int) -> str:
    return render_trace(flow, ["\n".join(["[/LOCALS]x"] * (size // 11))] + [""] * (len(flow.blocks) - 1))


def cpu_time(text: str, flow: Flow, repeat: int) -> tuple[float, dict]:
    best, out = math.inf, {}
    for _ in range(repeat):
        t = time.process_time()
        out = crm_score(text, flow)
        best = min(best, time.process_time() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4,64,256,1024", help="rollout sizes in KB, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", help="run only this rollout kind (repeatable)")
    ap.add_argument("--no-gc", action="store_true", help="disable the cyclic garbage collector while scoring")
    a = ap.parse_args()
    if a.no_gc:
        gc.disable()
    sizes = [int(s) for s in a.sizes.split(",")]
    rows: dict[str, list[tuple[float, float, str]]] = {}
    for kb in sizes:
        size = kb * 1024
        blocks = max(2, math.ceil(size / BLOCK_CHARS))
        normal = make_flow(blocks, size // blocks)
        small = make_flow(blocks, size // blocks // 4)
        cases: list[tuple[str, str, Flow]] = [
            ("normal exact", render_trace(normal), normal),
            ("normal respaced", with_locals(normal, respace, size), normal),
        ]
        cases += [(name, with_locals(small, fn, size // blocks), small) for name, fn in HOSTILE.items()]
        cases += [("long thought", long_thought(small, size), small), ("tag-like lines", tag_lines(small, size), small)]
        for name, text, flow in cases:
            if a.only and name not in a.only:
                continue
            sec, out = cpu_time(text, flow, a.repeat)
            verdict = f"{out['reward']:.1f}" if out["fmt"] else str(out["reason"])
            rows.setdefault(name, []).append((len(text) / 1024, sec * 1e6 / (len(text) / 1024), verdict))
    head_cells = "".join(f" {kb:>6} KB" for kb in sizes)
    gc_note = ", garbage collector off" if a.no_gc else ""
    print(f"µs of CPU per KB of rollout (crm_score, best of {a.repeat}{gc_note}); reward or reason in brackets")
    print(f"{'rollout':<16}{head_cells}   ratio  last x4  verdict")
    for name, cells in rows.items():
        line = "".join(f" {us:9.1f}" for _, us, _ in cells)
        ratio = cells[-1][1] / cells[0][1] if cells[0][1] > 0 else math.nan
        last = cells[-1][1] / cells[-2][1] if len(cells) > 1 and cells[-2][1] > 0 else math.nan
        kbs = "/".join(f"{k:.0f}" for k, _, _ in cells)
        print(f"{name:<16}{line}   {ratio:5.2f}  {last:7.2f}  [{cells[-1][2]}]  ({kbs} KB)")


if __name__ == "__main__":
    main()
