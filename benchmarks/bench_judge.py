"""Code-generation judge throughput: programs/s and tests/s on real LeetCodeDataset problems.

    python benchmarks/bench_judge.py [--n 300] [--rounds 3] [--before DIR]

The programs are the references of the first ``n`` merged training problems (each passes) and as many
wrong answers (each reference's method returning ``None``), judged as one batch by
:func:`codethinker.codegen.judge.judge_programs` (sandbox, warm pool over every core). The baseline in the
same run: the same programs and tests in this process, one after the other, with no isolation (``exec``
of the preamble, the program and each assert; a loop over them), the floor of any judge. ``--before DIR``
also times the judge of another checkout (``git archive <commit> | tar -x -C DIR``) in a child process,
rounds alternating with this checkout's, so that both see the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("CODETHINKER_MIRROR") or ROOT.parent / "shared" / "data") / "leetcodedataset"


def programs(n: int) -> tuple[list, list[str]]:
    from codethinker.codegen.task import make_problem
    from codethinker.data.sources import load_leetcode

    paths = [(v, MIRROR / f"LeetCodeDataset-{v}-train.jsonl.gz") for v in ("v0.1.0", "v0.2.0")]
    records, _ = load_leetcode(paths, extra=("test", "query"))
    probs = [make_problem(r) for r in records][:n]
    wrong = [p.reference.replace("return ", "return None  # ", 1) for p in probs]
    return probs + probs, [p.reference for p in probs] + wrong


def bare(probs: list, codes: list[str]) -> float:
    """Seconds for every program and test in this process (no isolation, no time limits)."""
    t0 = time.perf_counter()
    for p, code in zip(probs, codes, strict=True):
        ns: dict = {}
        try:
            exec(f"{p.preamble}\n\n{code}", ns)
            cls, meth = p.entry
            for test in p.tests:
                try:
                    exec(test, {**ns, "candidate": getattr(ns[cls](), meth)})
                except Exception:
                    pass
        except Exception:
            pass
    return time.perf_counter() - t0


def judged(n: int) -> dict:
    """One timed judge of the batch (in this interpreter, whatever ``codethinker`` it imports)."""
    from codethinker.codegen.judge import JudgeLimits, judge_programs

    probs, codes = programs(n)
    t0 = time.perf_counter()
    verdicts = judge_programs(probs, codes, JudgeLimits())
    secs = time.perf_counter() - t0
    return {"seconds": secs, "passed": sum(v.ok for v in verdicts), "tests": sum(len(p.tests) for p in probs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="problems (each judged with its reference and a wrong answer)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, help="another checkout to time beside this one")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(judged(a.n)))
        return
    probs, codes = programs(a.n)
    tests = sum(len(p.tests) for p in probs)
    rows: dict[str, list[float]] = {"bare": [], "after": [], "before": []}
    passed = {}
    for r in range(a.rounds):
        rows["bare"].append(bare(probs, codes))
        for name, tree in (("before", a.before), ("after", ROOT)):
            if tree is None:
                continue
            env = {**os.environ, "PYTHONPATH": str(tree)}
            cmd = [sys.executable, __file__, "--n", str(a.n), "--child"]
            out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{name}: {out.stderr[-2000:]}")
            res = json.loads(out.stdout.strip().splitlines()[-1])
            rows[name].append(res["seconds"])
            passed[name] = res["passed"]
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in rows.items() if v), file=sys.stderr)
    print(f"{len(codes)} programs ({a.n} references, {a.n} wrong answers), {tests} tests; {os.cpu_count()} cores")
    base = statistics.median(rows["bare"])
    for name in ("bare", "before", "after"):
        if not rows[name]:
            continue
        med = statistics.median(rows[name])
        extra = f", {passed[name]} passed" if name in passed else ""
        print(
            f"{name:>6}: median {med:6.2f} s, {len(codes) / med:7.1f} programs/s, {tests / med:7.1f} tests/s, "
            f"{med / base:5.1f}x bare{extra}"
        )


if __name__ == "__main__":
    main()
