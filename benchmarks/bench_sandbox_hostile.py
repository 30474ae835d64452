"""Sandbox pool throughput on real CRUXEval samples with 1% hostile programs mixed in, against the
clean run, measured in the same process.

    python benchmarks/bench_sandbox_hostile.py [--data PATH] [--rounds 3] [--share 0.01] [--repeats 2]

The clean batch is the CRUXEval samples with literal inputs (``--rounds`` passes, distinct source
text per pass, as in ``bench_sandbox.py``). The mixed batch is the same batch with every
``1/share``-th sample replaced by a program from ``tests/hostile/`` (cycling through them; those
that need a guard, such as the unbounded fork bomb, are left out). Both run on one warm pool
with the default limits (``timeout_s`` 2 s), alternately ``--repeats`` times; the best time of
each is kept. Printed: samples/s of both, the ratio mixed / clean, the statuses of the hostile
samples and the time they held a worker (``duration_s`` as the pool reports it).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sandbox import DEFAULT_DATA, load_jobs  # noqa: E402

from codethinker.sandbox import Job, Sandbox, SandboxConfig, SandboxResult  # noqa: E402
from tests._hostile import HOSTILE, header  # noqa: E402


def hostile_jobs() -> list[Job]:
    """Every corpus program that runs without a guard, with a harmless context."""
    scratch = Path("/var/tmp") / f"codethinker-bench-{os.getpid()}"
    ctx = {
        "sentinel": str(scratch / "sentinel.txt"),
        "sentinel_dir": str(scratch),
        "pwned": str(scratch / "pwned"),
        "parent_pid": os.getpid(),
        "project": str(ROOT),
        "port": 9,
    }
    paths = sorted(p for p in HOSTILE.glob("*.py") if not header(p).get("guard"))
    return [Job(p.read_text(), args=(ctx,), entry="f") for p in paths]


def mix(clean: list[Job], hostile: list[Job], share: float) -> tuple[list[Job], set[int]]:
    """``clean`` with every ``round(1/share)``-th job replaced by the next hostile one."""
    step = max(1, round(1 / share))
    out = list(clean)
    where = set()
    for k, i in enumerate(range(step - 1, len(out), step)):
        out[i] = hostile[k % len(hostile)]
        where.add(i)
    return out, where


def timed(sb: Sandbox, jobs: list[Job]) -> tuple[float, list[SandboxResult]]:
    t0 = time.perf_counter()
    res = sb.map(jobs)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--share", type=float, default=0.01, help="share of hostile samples in the mixed batch")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()

    jobs = load_jobs(args.data)
    clean = [dataclasses.replace(j, source=f"{j.source}\n# round {r}\n") for r in range(args.rounds) for j in jobs]
    hostile = hostile_jobs()
    mixed, where = mix(clean, hostile, args.share)
    print(
        f"{len(clean)} CRUXEval samples ({args.rounds} rounds); mixed batch: {len(where)} of them replaced by "
        f"{len(hostile)} hostile programs, cycled ({len(where) / len(mixed):.1%}); {os.cpu_count()} cores"
    )

    best_clean = best_mixed = float("inf")
    clean_res: list[SandboxResult] = []
    mixed_res: list[SandboxResult] = []
    # hostile programs kill parents and write files: never without bubblewrap
    with Sandbox(SandboxConfig(isolation="bwrap", workers=args.workers)) as sb:
        sb.map(clean[:50])  # start the pool
        for _ in range(args.repeats):
            t, clean_res = timed(sb, clean)
            best_clean = min(best_clean, t)
            t, mixed_res = timed(sb, mixed)
            best_mixed = min(best_mixed, t)
        stats = dict(sb.stats)
        iso, workers = sb.isolation, sb.n_workers

    hostile_res = [mixed_res[i] for i in sorted(where)]
    held = sum(r.duration_s for r in hostile_res)
    statuses = collections.Counter(r.status for r in hostile_res)
    same = sum(
        mixed_res[i] == clean_res[i] or mixed_res[i].status == clean_res[i].status
        for i in range(len(mixed))
        if i not in where
    )
    print(f"isolation {iso}, {workers} workers, best of {args.repeats}")
    print(f"clean batch : {len(clean) / best_clean:8.0f} samples/s ({best_clean:.2f} s)")
    print(f"mixed batch : {len(mixed) / best_mixed:8.0f} samples/s ({best_mixed:.2f} s)")
    print(f"hostile samples: {dict(statuses)}; they held a worker {held:.1f} s in all")
    print(f"clean samples of the mixed batch with the clean run's status: {same} of {len(mixed) - len(where)}")
    print(f"pool stats: {stats}")
    print(f"RATIO mixed / clean throughput = {best_clean / best_mixed:.1%}")


if __name__ == "__main__":
    main()
