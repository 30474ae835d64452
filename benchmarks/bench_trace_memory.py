"""The parent's peak memory while tracing many samples: streaming (``trace_iter``) against the list
form (``trace_many``), measured in one run.

    python benchmarks/bench_trace_memory.py [--n 10000] [--kind crux,large] [--size 300] [--workers N]

For each kind of sample and each form, a fresh child process of this script traces ``--n`` samples
and writes every truth JSON to a file as a stage does (``trace_iter``: each outcome as it comes;
``trace_many``: the list of all outcomes, then the file). Peak RSS only grows within a process, so
each form runs in a process of its own; the child reports its RSS after its imports (``VmRSS``), its
peak RSS at the end (``VmHWM``; the sandbox's zygotes and samples are other processes and are not
counted) and its samples/s. Kinds: ``crux``, the CRUXEval programs over and over with their inputs
(small truths, a few hundred bytes); ``large``, one program whose locals hold two lists of
``--size`` ints (a truth of tens of KB, as LeetCode samples with long inputs have).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "cruxeval" / "cruxeval.jsonl"
LARGE = (
    "def f(n, seed):\n"
    "    xs = [(seed * 7919 + i * 104729) % 1000003 for i in range(n)]\n"
    "    ys = sorted(xs)\n"
    "    return ys[:5]\n"
)


def items(kind: str, n: int, size: int, data: Path) -> Iterator[tuple[str, str, str]]:
    if kind == "crux":
        rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
        for row in itertools.islice(itertools.cycle(rows), n):
            yield row["code"], row["input"], "f"
    else:
        for i in range(n):
            yield LARGE, f"{size}, {i}", "f"


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in KiB (VmRSS: now, VmHWM: peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def child(form: str, kind: str, n: int, size: int, data: Path, workers: int | None) -> dict:
    from codethinker.contra import tracer as tracer_module
    from codethinker.sandbox import SandboxConfig

    config = SandboxConfig(timeout_s=5.0, workers=workers)
    base = _status("VmRSS")
    ok = 0
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w") as sink:
        todo = items(kind, n, size, data)
        tracer = tracer_module.trace_iter if form == "stream" else tracer_module.trace_many
        outcomes = tracer(todo, sandbox_config=config)
        for o in outcomes:
            ok += o.ok
            sink.write((o.flow.to_json() if o.ok else json.dumps(o.reason)) + "\n")
        written = sink.tell()
    wall = time.perf_counter() - t0
    return {"base_kib": base, "peak_kib": _status("VmHWM"), "ok": ok, "samples_s": n / wall, "out_mb": written / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="samples per form and kind")
    ap.add_argument("--kind", default="crux,large", help="comma-separated: crux, large")
    ap.add_argument("--size", type=int, default=300, help="ints per list in the large kind's locals")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--child", choices=["stream", "list"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.kind, args.n, args.size, args.data, args.workers)))
        return
    print(f"{args.n} samples per run; peak RSS of the parent process (VmHWM), MiB")
    head = f"{'kind':6} {'form':22} {'after imports':>14} {'peak':>8} {'growth':>8} {'samples/s':>10} {'ok':>6}"
    print(f"{head} {'truths':>9}")
    for kind in args.kind.split(","):
        if kind == "crux" and not args.data.exists():
            print(f"{kind:6} skipped: {args.data} is absent")
            continue
        for form, name in (("stream", "trace_iter (stream)"), ("list", "trace_many (list)")):
            cmd = [sys.executable, __file__, "--child", form, "--kind", kind, "--n", str(args.n)]
            cmd += ["--size", str(args.size), "--data", str(args.data)]
            cmd += ["--workers", str(args.workers)] if args.workers else []
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            base, peak = r["base_kib"] / 1024, r["peak_kib"] / 1024
            print(
                f"{kind:6} {name:22} {base:14.1f} {peak:8.1f} {peak - base:8.1f} {r['samples_s']:10.1f}"
                f" {r['ok']:6d} {r['out_mb']:6.1f} MB"
            )


if __name__ == "__main__":
    main()
