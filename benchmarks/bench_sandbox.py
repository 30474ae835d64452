"""Sandbox throughput on real CRUXEval samples, as ratios measured in one run.

    python benchmarks/bench_sandbox.py [--data PATH] [--rounds 3] [--subprocess-samples 40]

Prints samples/s for: plain in-process ``exec`` (no isolation), the sandbox (warm pool over all
cores), and one ``subprocess.run([python, -c, ...])`` per sample; then the two ratios the
sandbox is held to: >= 30x subprocess-per-sample and >= 10% of in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codethinker.contra.values import NoLiteral, canonicalize, parse_call_args  # noqa: E402
from codethinker.sandbox import Job, Sandbox, SandboxConfig  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "cruxeval" / "cruxeval.jsonl"


def load_jobs(path: Path) -> list[Job]:
    jobs = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        try:
            args, kwargs = parse_call_args(row["input"])
        except ValueError:
            continue  # expression inputs (a few CRUXEval rows) are not literals
        jobs.append(Job(source=row["code"], args=args, kwargs=kwargs))
    return jobs


def in_process(jobs: list[Job]) -> tuple[float, int]:
    ok = 0
    sink = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        for job in jobs:
            g: dict = {}
            try:
                exec(compile(job.source, "<sample>", "exec"), g)
                canonicalize(g[job.entry](*job.args, **job.kwargs))
                ok += 1
            except (Exception, NoLiteral):
                pass
    return time.perf_counter() - t0, ok


_SUBPROCESS_PROG = (
    "import sys, pickle; sys.path.insert(0, {root!r}); from codethinker.contra.values import canonicalize\n"
    "g = {{}}; exec({src!r}, g); print(repr(canonicalize(g['f'](*{args!r}, **{kwargs!r}))))"
)


def per_subprocess(jobs: list[Job]) -> float:
    t0 = time.perf_counter()
    for job in jobs:
        prog = _SUBPROCESS_PROG.format(root=str(ROOT), src=job.source, args=job.args, kwargs=job.kwargs)
        subprocess.run([sys.executable, "-c", prog], capture_output=True, timeout=30, check=False)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--rounds", type=int, default=3, help="passes over the samples (sandbox and in-process)")
    ap.add_argument("--subprocess-samples", type=int, default=40)
    ap.add_argument("--isolation", default="auto")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()

    jobs = load_jobs(args.data)
    # every round gets distinct source text, so no per-source cache helps the sandbox
    batch = [dataclasses.replace(j, source=f"{j.source}\n# round {r}\n") for r in range(args.rounds) for j in jobs]
    print(f"{len(jobs)} CRUXEval samples with literal inputs, {args.rounds} rounds, {os.cpu_count()} cores")

    # in-process runs get copies: samples mutate their arguments (xs.append ...)
    t_in, _ = in_process(copy.deepcopy(batch))
    t_in2, _ = in_process(copy.deepcopy(batch))
    t_in = min(t_in, t_in2)

    cfg = SandboxConfig(isolation=args.isolation, workers=args.workers)
    with Sandbox(cfg) as sb:
        t0 = time.perf_counter()
        sb.map(jobs[:50])  # start the pool
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = sb.map(batch)
        t_sb = time.perf_counter() - t0
        stats = dict(sb.stats)
        iso = sb.isolation
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.status] = statuses.get(r.status, 0) + 1

    sub = jobs[: args.subprocess_samples]
    t_sub = per_subprocess(sub)

    rate_in = len(batch) / t_in
    rate_sb = len(batch) / t_sb
    rate_sub = len(sub) / t_sub
    print(f"in-process exec (no isolation): {rate_in:10.0f} samples/s ({1e6 / rate_in:8.1f} us/sample)")
    print(f"sandbox ({iso}, warm pool)     : {rate_sb:10.0f} samples/s ({1e6 / rate_sb:8.1f} us/sample)")
    print(f"subprocess.run per sample       : {rate_sub:10.1f} samples/s ({1e3 / rate_sub:8.1f} ms/sample)")
    print(f"pool start + first 50 samples   : {t_start:.3f} s")
    print(f"sandbox statuses: {statuses}; pool stats: {stats}")
    r_sub = rate_sb / rate_sub
    r_in = rate_sb / rate_in
    print(f"RATIO sandbox / subprocess-per-sample = {r_sub:.1f}x  (target >= 30x)  {'PASS' if r_sub >= 30 else 'FAIL'}")
    print(f"RATIO sandbox / in-process            = {r_in:.1%}  (target >= 10%)  {'PASS' if r_in >= 0.10 else 'FAIL'}")


if __name__ == "__main__":
    main()
